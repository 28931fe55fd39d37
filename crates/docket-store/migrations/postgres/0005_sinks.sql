-- Delivery cursors of notification sinks (webhooks). One node at a time holds a sink's lease and
-- advances its cursor after the sink acknowledged a batch: at-least-once, in order.
CREATE TABLE docket_sinks (
    name text PRIMARY KEY,
    seq bigint NOT NULL DEFAULT 0,
    owner text,
    lease_until timestamptz
);
