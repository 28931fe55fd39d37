-- Rows inserted with plain SQL (another program, psql) wake long-polling claimers on every node
-- at once, as docket's own inserts do. One notification per INSERT statement, not per row, and
-- no transition table (a transition table cost a quarter of a 20,000-row insert, see 0002):
-- the payload names no queue ("schema|"), so every claimer of the schema looks once. docket's
-- own insert statement already notified the exact queues; it sets docket.woken for its
-- transaction so this trigger stays quiet.
CREATE OR REPLACE FUNCTION docket_wake_plain_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(current_setting('docket.woken', true), '') <> 'on' THEN
    PERFORM pg_notify('docket_available', TG_TABLE_SCHEMA || '|');
  END IF;
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS docket_tasks_wake_plain_insert ON docket_tasks;
CREATE TRIGGER docket_tasks_wake_plain_insert AFTER INSERT ON docket_tasks
  FOR EACH STATEMENT EXECUTE FUNCTION docket_wake_plain_insert();
