SELECT CAST(@@innodb_autoinc_lock_mode AS SIGNED) AS m,
    CAST(@@auto_increment_increment AS SIGNED) AS i
