-- Statements only a MariaDB Galera node runs (MySqlStore::begin says why).

-- name: tx_alive_table
-- The connection's own table (temporary: not replicated) of the row each transaction that
-- writes starts with.
CREATE TEMPORARY TABLE IF NOT EXISTS docket_tx_alive (n TINYINT NOT NULL) ENGINE=InnoDB

-- name: tx_alive_mark
INSERT INTO docket_tx_alive (n) VALUES (1)

-- name: tx_alive_check
-- One row deleted: the transaction is the one begun.
DELETE FROM docket_tx_alive
