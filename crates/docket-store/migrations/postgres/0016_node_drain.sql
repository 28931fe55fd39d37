-- Draining a node (node-daemons' "move tasks to another node"): since when it claims nothing.
ALTER TABLE docket_nodes ADD COLUMN draining_at timestamptz;
