-- A lock row is taken by a write that changes it (issue 38): MariaDB Galera certifies the rows a
-- transaction writes, and an upsert that changes nothing (`name = name`) writes nothing — two
-- docket nodes on different Galera nodes then both held "the" lock. Every take bumps `n`.
ALTER TABLE docket_locks ADD COLUMN n BIGINT NOT NULL DEFAULT 0;
