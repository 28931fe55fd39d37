UPDATE docket_tasks SET state = ?2, run_at = ?3, finished_at = ?4,
    errors = json_insert(errors, '$[#]', json(?5)), lease_expires_at = NULL WHERE id = ?1
