-- The node registry and worker reports.

