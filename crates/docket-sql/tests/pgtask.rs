//! pg_task compatibility against the local PostgreSQL: every test serves its own schema's
//! `task` table with the real executor and checks the rows byte for byte.

use docket_sql::pgtask;
use docket_sql::PgTaskConfig;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::Row;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The PostgreSQL the tests run on: 127.0.0.1 at `DOCKET_TEST_PGTASK_PORT` (default 5432;
/// `scripts/pg-versions.sh` runs them on other versions).
fn port() -> u16 {
    std::env::var("DOCKET_TEST_PGTASK_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(5432)
}

fn url() -> String {
    format!(
        "host=127.0.0.1 port={} user=postgres dbname=postgres",
        port()
    )
}

fn sqlx_url() -> String {
    format!("postgres://postgres@127.0.0.1:{}/postgres", port())
}

struct Served {
    db: PgPool,
    schema: String,
    stops: Vec<(CancellationToken, tokio::task::JoinHandle<()>)>,
}

impl Served {
    fn t(&self) -> String {
        format!("{}.task", self.schema)
    }

    async fn exec(&self, sql: &str) {
        sqlx::raw_sql(sql)
            .execute(&self.db)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// Waits until `sql` (a boolean query) is true.
    async fn until(&self, sql: &str, within: Duration) {
        let end = Instant::now() + within;
        loop {
            let ok: bool = sqlx::query_scalar(sql).fetch_one(&self.db).await.unwrap();
            if ok {
                return;
            }
            assert!(Instant::now() < end, "timed out waiting for: {sql}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until no task of `group` is PLAN/TAKE/WORK.
    async fn settled(&self, group: &str, within: Duration) {
        self.until(
            &format!(
                "SELECT count(*) = 0 FROM {} WHERE \"group\" = '{group}' AND state IN ('PLAN', 'TAKE', 'WORK')",
                self.t()
            ),
            within,
        )
        .await;
    }

    async fn stop(self) {
        for (c, h) in self.stops {
            c.cancel();
            let _ = h.await;
        }
        let _ = sqlx::raw_sql(&format!("DROP SCHEMA {} CASCADE", self.schema))
            .execute(&self.db)
            .await;
    }
}

async fn serve_with(nodes: usize, edit: impl Fn(&mut PgTaskConfig)) -> Served {
    serve_in(
        format!("pgt_{}", uuid::Uuid::new_v4().simple()),
        nodes,
        edit,
    )
    .await
}

/// [`serve_with`] on a schema the test names (it may have made the table itself).
async fn serve_in(schema: String, nodes: usize, edit: impl Fn(&mut PgTaskConfig)) -> Served {
    let db = PgPoolOptions::new()
        .max_connections(4)
        .connect(&sqlx_url())
        .await
        .expect("PostgreSQL at 127.0.0.1 (scripts/test.sh starts it)");
    let mut cfg = PgTaskConfig::new(url());
    cfg.schema = schema.clone();
    cfg.sleep = Duration::from_millis(200);
    edit(&mut cfg);
    let mut stops = Vec::new();
    for n in 0..nodes {
        let cancel = CancellationToken::new();
        let h = pgtask::start(
            cfg.clone(),
            &format!("node{n}"),
            cancel.clone(),
            Duration::from_secs(5),
        )
        .await
        .expect("pg_task table starts");
        stops.push((cancel, h));
    }
    Served { db, schema, stops }
}

async fn serve() -> Served {
    serve_with(1, |_| {}).await
}

/// (group, input, extra columns, state, output, error)
type Case<'a> = (
    &'a str,
    String,
    &'a str,
    &'a str,
    Option<&'a str>,
    Option<String>,
);

/// (state, output, error) of the only task of `group`.
async fn result(s: &Served, group: &str) -> (String, Option<String>, Option<String>) {
    let r = sqlx::query(&format!(
        "SELECT state::text, output, error FROM {} WHERE \"group\" = $1",
        s.t()
    ))
    .bind(group)
    .fetch_one(&s.db)
    .await
    .unwrap();
    (r.get(0), r.get(1), r.get(2))
}

/// A `remote` of the test server (pg_task's libpq path), as an extra column of a case.
fn remote() -> String {
    format!(", remote => 'host=127.0.0.1 port={} user=postgres'", port())
}

#[tokio::test]
async fn output_and_error_text_byte_for_byte() {
    let s = serve().await;
    let t = s.t();
    let remote = remote();
    let remote = remote.as_str();
    // (group, input, extra columns, state, output, error)
    let cases: Vec<Case> = vec![
        ("err", "SELECT 1/0 AS a".into(), "", "FAIL", None,
         Some("ERROR:  division by zero\nSTATEMENT:  SELECT 1/0 AS a".into())),
        ("one", "SELECT 1 AS a".into(), "", "DONE", Some("1"), None),
        ("cols", "SELECT 1 AS a, 2 AS b".into(), "", "DONE", Some("a\tb\n1\t2"), None),
        ("stmts", "SELECT 1 AS a, 2 AS b;SELECT 3 AS c".into(), "", "DONE", Some("a\tb\n1\t2\n3"), None),
        ("noheader", "SELECT 1 AS a, NULL AS b".into(), ", header => false", "DONE", Some("1\t\\N"), None),
        ("quote", "SELECT 'a' || '\"' || 'b' || chr(92) || 'c' AS a".into(),
         ", quote => '\"', escape => '\\'", "DONE", Some("\"a\\\"b\\\\c\""), None),
        ("string", "SELECT 1 AS n, 'x' AS s, true AS b".into(),
         ", quote => '''', delimiter => ','", "DONE", Some("'n','s','b'\n1,'x',t"), None),
        ("nostring", "SELECT 1 AS n, 'x' AS s".into(),
         ", quote => '''', delimiter => ',', string => false, \"null\" => 'NULL'", "DONE", Some("'n','s'\n'1','x'"), None),
        ("tag", format!("DELETE FROM {t} WHERE false"), "", "DONE", Some("DELETE 0"), None),
        ("insert", "CREATE TEMP TABLE x (i int); INSERT INTO x VALUES (1), (2); UPDATE x SET i = 3".into(), "", "DONE",
         Some("CREATE TABLE\nINSERT 0 2\nUPDATE 2"), None),
        ("tx", "BEGIN; SELECT 1 AS a".into(), "", "DONE", Some("BEGIN\n1\nCOMMIT"), None),
        ("empty", "SELECT unnest(ARRAY['', 'a', '', 'b'])".into(), "", "DONE", Some("\na\n\nb"), None),
        ("void", "SELECT pg_sleep(0)".into(), "", "DONE", Some(""), None),
        ("timeout", "SELECT pg_sleep(3) AS a".into(), ", timeout => '500 ms'", "FAIL", None,
         Some("ERROR:  canceling statement due to statement timeout\nSTATEMENT:  SELECT pg_sleep(3) AS a".into())),
        ("hint", "DO $inner$ BEGIN RAISE EXCEPTION 'boom' USING DETAIL = 'detail text', HINT = 'hint text'; END $inner$;".into(),
         "", "FAIL", None,
         Some("ERROR:  boom\nDETAIL:  detail text\nHINT:  hint text\nCONTEXT:  PL/pgSQL function inline_code_block line 1 at RAISE\nSTATEMENT:  DO $inner$ BEGIN RAISE EXCEPTION 'boom' USING DETAIL = 'detail text', HINT = 'hint text'; END $inner$;".into())),
        ("position", "SELECT nosuchcolumn".into(), "", "FAIL", None,
         Some("ERROR:  column \"nosuchcolumn\" does not exist at character 8\nSTATEMENT:  SELECT nosuchcolumn".into())),
        ("kept", "SELECT 1 WHERE false".into(), ", \"delete\" => false", "DONE", None, None),
        // COPY, as pg_task's regression tests have it (expected/local.out, remote.out): a
        // local task refuses both directions; a remote one keeps COPY TO STDOUT's data and
        // fails COPY FROM STDIN with the server's answer.
        ("copyout", "COPY (SELECT 1) TO STDOUT".into(), "", "FAIL", None,
         Some("ERROR:  COPY TO STDOUT is not supported\nSTATEMENT:  COPY (SELECT 1) TO STDOUT".into())),
        ("copyin", format!("COPY {t} FROM STDIN"), "", "FAIL", None,
         Some(format!("ERROR:  COPY FROM STDIN is not supported\nSTATEMENT:  COPY {t} FROM STDIN"))),
        ("rcopyout", "COPY (SELECT 1) TO STDOUT".into(), remote, "DONE", Some("1\n"), None),
        ("rcopyin", format!("COPY {t} FROM STDIN"), remote, "FAIL", None,
         Some(format!("ERROR:  COPY from stdin failed: COPY FROM STDIN is not supported\nCONTEXT:  COPY {}, line 1\nSTATEMENT:  COPY {t} FROM STDIN", t.rsplit('.').next().unwrap().trim_matches('"')))),
    ];
    for (g, input, extra, ..) in &cases {
        let mut cols = vec!["\"group\"".to_string(), "input".into()];
        let mut vals = vec![format!("'{g}'"), format!("$in${input}$in$")];
        for kv in extra.split(", ").filter(|x| !x.is_empty()) {
            let (k, v) = kv.split_once(" => ").unwrap();
            cols.push(k.into());
            vals.push(v.into());
        }
        s.exec(&format!(
            "INSERT INTO {t} ({}) VALUES ({})",
            cols.join(", "),
            vals.join(", ")
        ))
        .await;
    }
    // A task of no output and no error is deleted (delete defaults to true).
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input) VALUES ('gone', 'SELECT 1 WHERE false')"
    ))
    .await;
    for (g, ..) in &cases {
        s.settled(g, Duration::from_secs(30)).await;
    }
    for (g, _, _, state, output, error) in cases {
        let got = result(&s, g).await;
        assert_eq!(
            got,
            (state.to_string(), output.map(String::from), error),
            "case {g}"
        );
    }
    s.settled("gone", Duration::from_secs(30)).await;
    let left: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {t} WHERE \"group\" = 'gone'"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert_eq!(left, 0, "an empty result with delete is removed");
    // Every task records start, stop and the pid of the backend that ran it.
    let bad: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {t} WHERE start IS NULL OR stop IS NULL OR pid IS NULL OR pid = pg_backend_pid() OR stop < start"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert_eq!(bad, 0);
    s.stop().await;
}

#[tokio::test]
async fn max_one_count_five_runs_ten_tasks_on_two_connections() {
    let s = serve().await;
    let t = s.t();
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input, max, count) SELECT 'pair', 'SELECT pg_sleep(0.3) AS a', 1, 5 FROM generate_series(1, 10)"
    ))
    .await;
    s.settled("pair", Duration::from_secs(60)).await;
    let per_pid: Vec<i64> = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {t} WHERE \"group\" = 'pair' AND state = 'DONE' GROUP BY pid ORDER BY 1"
    ))
    .fetch_all(&s.db)
    .await
    .unwrap();
    assert_eq!(per_pid, vec![5, 5]);
    // Never more than max + 1 = 2 at once: at no task's start are three running.
    let overlap: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {t} a WHERE \"group\" = 'pair' AND (SELECT count(*) FROM {t} b WHERE b.\"group\" = 'pair' AND b.start <= a.start AND b.stop > a.start) > 2"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert_eq!(overlap, 0);
    s.stop().await;
}

#[tokio::test]
async fn tasks_not_started_within_active_are_gone() {
    let s = serve().await;
    let t = s.t();
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input, max, count, active) SELECT 'act', 'SELECT pg_sleep(10) AS a', 1, 5, '5 sec' FROM generate_series(1, 10)"
    ))
    .await;
    s.settled("act", Duration::from_secs(60)).await;
    let rows: Vec<(String, Option<String>, i64)> = sqlx::query(&format!(
        "SELECT state::text, error, count(*) FROM {t} WHERE \"group\" = 'act' GROUP BY 1, 2 ORDER BY 1"
    ))
    .fetch_all(&s.db)
    .await
    .unwrap()
    .into_iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect();
    assert_eq!(
        rows,
        vec![
            ("DONE".into(), None, 2),
            ("GONE".into(), Some("ERROR:  task not active".into()), 8)
        ]
    );
    s.stop().await;
}

#[tokio::test]
async fn negative_max_spaces_runs_by_its_pause() {
    let s = serve().await;
    let t = s.t();
    for drift in [false, true] {
        let g = format!("pause{drift}");
        s.exec(&format!(
            "INSERT INTO {t} (\"group\", input, max, drift) SELECT '{g}', 'SELECT clock_timestamp() AS a', -1000, {drift} FROM generate_series(1, 4)"
        ))
        .await;
        s.settled(&g, Duration::from_secs(30)).await;
        let gaps: Vec<Option<f64>> = sqlx::query_scalar(&format!(
            "SELECT extract(epoch FROM start - lag(start) OVER (ORDER BY start))::float8 FROM {t} WHERE \"group\" = '{g}' ORDER BY start"
        ))
        .fetch_all(&s.db)
        .await
        .unwrap();
        let gaps: Vec<f64> = gaps.into_iter().flatten().collect();
        assert_eq!(gaps.len(), 3, "{g}: {gaps:?}");
        for gap in &gaps {
            assert!((0.95..2.5).contains(gap), "{g}: gaps {gaps:?}");
        }
    }
    s.stop().await;
}

#[tokio::test]
async fn repeat_keeps_the_parent_chain_and_the_grid() {
    let s = serve().await;
    let t = s.t();
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input, repeat, \"delete\") VALUES ('grid', 'SELECT 1 AS a', '1 sec', false), ('drift', 'SELECT pg_sleep(0.3)', '1 sec', true)"
    ))
    .await;
    s.exec(&format!(
        "UPDATE {t} SET drift = true WHERE \"group\" = 'drift'"
    ))
    .await;
    s.until(
        &format!("SELECT count(*) >= 4 FROM {t} WHERE \"group\" = 'grid' AND state = 'DONE'"),
        Duration::from_secs(30),
    )
    .await;
    s.until(
        &format!("SELECT count(*) >= 3 FROM {t} WHERE \"group\" = 'drift' AND state = 'DONE'"),
        Duration::from_secs(30),
    )
    .await;
    s.exec(&format!(
        "UPDATE {t} SET state = 'STOP' WHERE state = 'PLAN'"
    ))
    .await;
    s.until(
        &format!("SELECT count(*) = 0 FROM {t} WHERE state IN ('TAKE', 'WORK')"),
        Duration::from_secs(30),
    )
    .await;
    let rows = sqlx::query(&format!(
        "SELECT id, parent, plan, stop, output FROM {t} WHERE \"group\" = 'grid' ORDER BY id"
    ))
    .fetch_all(&s.db)
    .await
    .unwrap();
    let first_plan: chrono::DateTime<chrono::Utc> = rows[0].get(2);
    for (k, pair) in rows.windows(2).enumerate() {
        let (prev, next) = (&pair[0], &pair[1]);
        assert_eq!(
            next.get::<Option<i64>, _>(1),
            Some(prev.get::<i64, _>(0)),
            "parent chain"
        );
        let plan: chrono::DateTime<chrono::Utc> = next.get(2);
        let offset = (plan - first_plan).num_microseconds().unwrap();
        assert_eq!(
            offset % 1_000_000,
            0,
            "on the grid: plan {k} is {offset} µs after the first"
        );
    }
    // Drift: each successor is planned a repeat after its predecessor's end.
    let rows = sqlx::query(&format!(
        "SELECT id, parent, plan, stop FROM {t} WHERE \"group\" = 'drift' ORDER BY id"
    ))
    .fetch_all(&s.db)
    .await
    .unwrap();
    for pair in rows.windows(2) {
        let stop: Option<chrono::DateTime<chrono::Utc>> = pair[0].get(3);
        let plan: chrono::DateTime<chrono::Utc> = pair[1].get(2);
        let d = (plan - stop.unwrap()).num_milliseconds();
        assert!(
            (900..1200).contains(&d),
            "drift: planned {d} ms after the end"
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn a_killed_backend_is_reset_and_run_again_on_a_new_pid() {
    let s = serve_with(1, |c| c.reset = Duration::from_secs(1)).await;
    let t = s.t();
    let schema = &s.schema;
    s.exec(&format!("CREATE TABLE {schema}.killed (at timestamptz)"))
        .await;
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input) VALUES ('kill', 'SELECT pg_sleep(CASE WHEN EXISTS (SELECT 1 FROM {schema}.killed) THEN 0 ELSE 60 END)')"
    ))
    .await;
    s.until(
        &format!("SELECT EXISTS (SELECT 1 FROM {t} WHERE \"group\" = 'kill' AND state = 'WORK' AND pid IS NOT NULL)"),
        Duration::from_secs(30),
    )
    .await;
    let first: i32 = sqlx::query_scalar(&format!("SELECT pid FROM {t} WHERE \"group\" = 'kill'"))
        .fetch_one(&s.db)
        .await
        .unwrap();
    s.exec(&format!("INSERT INTO {schema}.killed VALUES (now())"))
        .await;
    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(first)
        .fetch_one(&s.db)
        .await
        .unwrap();
    assert!(killed);
    s.settled("kill", Duration::from_secs(30)).await;
    let r = sqlx::query(&format!(
        "SELECT state::text, pid, error, start >= (SELECT at FROM {schema}.killed) FROM {t} WHERE \"group\" = 'kill'"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert_eq!(r.get::<String, _>(0), "DONE");
    assert_ne!(r.get::<i32, _>(1), first, "run again on a new backend");
    assert_eq!(r.get::<Option<String>, _>(2), None);
    assert!(r.get::<bool, _>(3));
    s.stop().await;
}

#[tokio::test]
async fn remote_parent_and_session_settings() {
    let s = serve().await;
    let t = s.t();
    let schema = &s.schema;
    let port = port();
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input, remote) VALUES \
         ('remote', 'SELECT current_database() AS d', 'host=127.0.0.1 port={port} user=postgres dbname=template1'), \
         ('badremote', 'SELECT 1', 'host=127.0.0.1 port=notaport'), \
         ('deadremote', 'SELECT 1', 'host=127.0.0.1 port=1 connect_timeout=5'), \
         ('norole', 'SELECT 1', 'host=127.0.0.1 port={port} user=no_such_role_docket dbname=postgres')"
    ))
    .await;
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input) VALUES ('parent', $$INSERT INTO {t} (\"group\", input) VALUES ('child', 'SELECT 2 AS b')$$)"
    ))
    .await;
    for g in [
        "remote",
        "badremote",
        "deadremote",
        "norole",
        "parent",
        "child",
    ] {
        s.settled(g, Duration::from_secs(30)).await;
    }
    assert_eq!(
        result(&s, "remote").await,
        ("DONE".into(), Some("template1".into()), None)
    );
    let (state, _, err) = result(&s, "badremote").await;
    assert_eq!(state, "FAIL");
    assert!(err
        .unwrap()
        .starts_with("ERROR:  invalid connection string"));
    let (state, _, err) = result(&s, "deadremote").await;
    assert_eq!(state, "FAIL");
    assert!(err
        .unwrap()
        .starts_with("ERROR:  could not connect to server"));
    let (state, _, err) = result(&s, "norole").await;
    assert_eq!(state, "FAIL");
    assert_eq!(
        err.unwrap(),
        "FATAL:  role \"no_such_role_docket\" does not exist"
    );
    assert_eq!(result(&s, "parent").await.1.as_deref(), Some("INSERT 0 1"));
    let linked: bool = sqlx::query_scalar(&format!(
        "SELECT c.parent = p.id FROM {t} c, {t} p WHERE c.\"group\" = 'child' AND p.\"group\" = 'parent'"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert!(linked, "a task inserted by a task has it as parent");
    // Defaults come from pg_task.* settings of the session (then role, database).
    let mut c = s.db.acquire().await.unwrap();
    sqlx::raw_sql(&format!(
        "SET pg_task.delimiter = ','; SET pg_task.max = '3'; SELECT set_config('pg_task.group', 'fromguc', false); INSERT INTO {schema}.task (input) VALUES ('SELECT 1 AS a, 2 AS b')"
    ))
    .execute(&mut *c)
    .await
    .unwrap();
    drop(c);
    s.settled("fromguc", Duration::from_secs(30)).await;
    let r = sqlx::query(&format!(
        "SELECT max, output FROM {t} WHERE \"group\" = 'fromguc'"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert_eq!(r.get::<i32, _>(0), 3);
    assert_eq!(r.get::<Option<String>, _>(1).as_deref(), Some("a,b\n1,2"));
    s.stop().await;
}

#[tokio::test]
async fn save_false_resets_the_session_between_tasks() {
    let s = serve().await;
    let t = s.t();
    for save in [true, false] {
        let g = format!("save{save}");
        s.exec(&format!(
            "INSERT INTO {t} (\"group\", input, count, save, plan) VALUES \
             ('{g}', 'SET application_name = ''changed''', 2, {save}, now()), \
             ('{g}', 'SELECT current_setting(''application_name'') AS a', 2, {save}, now() + interval '1 ms')"
        ))
        .await;
        s.settled(&g, Duration::from_secs(30)).await;
        let rows = sqlx::query(&format!(
            "SELECT pid, output FROM {t} WHERE \"group\" = '{g}' ORDER BY id"
        ))
        .fetch_all(&s.db)
        .await
        .unwrap();
        assert_eq!(
            rows[0].get::<i32, _>(0),
            rows[1].get::<i32, _>(0),
            "one session"
        );
        let second: Option<String> = rows[1].get(1);
        if save {
            assert_eq!(second.as_deref(), Some("changed"));
        } else {
            assert!(
                second.unwrap().starts_with("docket pg_task"),
                "DISCARD ALL reset it"
            );
        }
    }
    s.stop().await;
}

#[tokio::test]
async fn two_nodes_never_run_a_task_twice() {
    let s = serve_with(2, |c| c.sleep = Duration::from_millis(50)).await;
    let t = s.t();
    let schema = &s.schema;
    s.exec(&format!("CREATE TABLE {schema}.ran (id int8 PRIMARY KEY)"))
        .await;
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input, max) SELECT 'both', 'INSERT INTO {schema}.ran VALUES (current_setting(''pg_task.id'')::int8)', 3 FROM generate_series(1, 300)"
    ))
    .await;
    s.settled("both", Duration::from_secs(120)).await;
    let (done, ran): (i64, i64) = sqlx::query_as(&format!(
        "SELECT (SELECT count(*) FROM {t} WHERE \"group\" = 'both' AND state = 'DONE' AND output = 'INSERT 0 1'), (SELECT count(*) FROM {schema}.ran)"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert_eq!((done, ran), (300, 300));
    let overlap: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {t} a WHERE \"group\" = 'both' AND (SELECT count(*) FROM {t} b WHERE b.\"group\" = 'both' AND b.start <= a.start AND b.stop > a.start) > 4"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert_eq!(overlap, 0, "max 3 allows 4 at once across both nodes");
    s.stop().await;
}

/// Ends are recorded in batches (every session's end that queued while the control session
/// was busy, in one transaction): with eight sessions reusing their connections on two nodes,
/// every task still ends once with its own output or error, the next task of the group goes to
/// each session that asked, `count` and `max` hold, and nothing is left taken.
#[tokio::test]
async fn batched_ends_keep_every_result_and_the_group_limits() {
    let s = serve_with(2, |c| c.sleep = Duration::from_millis(50)).await;
    let t = s.t();
    let schema = &s.schema;
    s.exec(&format!("CREATE TABLE {schema}.ran (id int8 PRIMARY KEY)"))
        .await;
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input, max, count) SELECT 'many', \
           CASE WHEN g % 10 = 0 THEN 'SELECT 1/0' \
           ELSE 'INSERT INTO {schema}.ran VALUES (current_setting(''pg_task.id'')::int8)' END, 7, 40 \
         FROM generate_series(1, 400) g"
    ))
    .await;
    s.settled("many", Duration::from_secs(120)).await;
    let (done, failed, ran, wrong): (i64, i64, i64, i64) = sqlx::query_as(&format!(
        "SELECT count(*) FILTER (WHERE state = 'DONE' AND output = 'INSERT 0 1' AND error IS NULL), \
           count(*) FILTER (WHERE state = 'FAIL' AND input = 'SELECT 1/0' AND error LIKE '%division by zero%'), \
           (SELECT count(*) FROM {schema}.ran r JOIN {t} x ON x.id = r.id AND x.state = 'DONE'), \
           count(*) FILTER (WHERE state NOT IN ('DONE', 'FAIL')) \
         FROM {t} WHERE \"group\" = 'many'"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert_eq!((done, failed, ran, wrong), (360, 40, 360, 0));
    let most: i64 = sqlx::query_scalar(&format!(
        "SELECT max(n) FROM (SELECT count(*) AS n FROM {t} WHERE \"group\" = 'many' GROUP BY pid) p"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert!(most <= 40, "count 40: a session ran {most}");
    let overlap: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {t} a WHERE \"group\" = 'many' AND (SELECT count(*) FROM {t} b WHERE b.\"group\" = 'many' AND b.start <= a.start AND b.stop > a.start) > 8"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert_eq!(overlap, 0, "max 7 allows 8 at once across both nodes");
    s.stop().await;
}

#[tokio::test]
async fn stop_cancels_a_running_task() {
    let s = serve().await;
    let t = s.t();
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input) VALUES ('stop', 'SELECT pg_sleep(60)')"
    ))
    .await;
    s.until(
        &format!("SELECT EXISTS (SELECT 1 FROM {t} WHERE \"group\" = 'stop' AND state = 'WORK')"),
        Duration::from_secs(30),
    )
    .await;
    let pid: i32 = sqlx::query_scalar(&format!("SELECT pid FROM {t} WHERE \"group\" = 'stop'"))
        .fetch_one(&s.db)
        .await
        .unwrap();
    let started = Instant::now();
    s.exec(&format!(
        "UPDATE {t} SET state = 'STOP' WHERE \"group\" = 'stop'"
    ))
    .await;
    s.until(
        &format!(
            "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = {pid} AND state = 'active' AND query LIKE '%pg_sleep(60)%')"
        ),
        Duration::from_secs(20),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(20));
    let state: String = sqlx::query_scalar(&format!(
        "SELECT state::text FROM {t} WHERE \"group\" = 'stop'"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert_eq!(state, "STOP");
    s.stop().await;
}

#[tokio::test]
async fn a_lost_control_session_is_reconnected_without_running_anything_twice() {
    let s = serve().await;
    let t = s.t();
    let schema = &s.schema;
    s.exec(&format!("CREATE TABLE {schema}.ran (id int8)"))
        .await;
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input) VALUES ('ctl', 'INSERT INTO {schema}.ran SELECT current_setting(''pg_task.id'')::int8 FROM pg_sleep(2)')"
    ))
    .await;
    s.until(
        &format!("SELECT EXISTS (SELECT 1 FROM {t} WHERE \"group\" = 'ctl' AND state = 'WORK')"),
        Duration::from_secs(30),
    )
    .await;
    // docket's own bookkeeping sessions (not the task's) die under the running task.
    let killed: Vec<String> = sqlx::query_scalar(
        "SELECT application_name FROM pg_stat_activity WHERE application_name IN ($1, $2) AND pg_terminate_backend(pid)",
    )
    .bind(format!("docket {t}"))
    .bind(format!("docket control {t}"))
    .fetch_all(&s.db)
    .await
    .unwrap();
    assert!(
        killed.contains(&format!("docket control {t}")),
        "{killed:?}"
    );
    s.settled("ctl", Duration::from_secs(30)).await;
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input) VALUES ('after', 'SELECT 7 AS a')"
    ))
    .await;
    s.settled("after", Duration::from_secs(30)).await;
    assert_eq!(
        result(&s, "ctl").await,
        ("DONE".into(), Some("INSERT 0 1".into()), None)
    );
    assert_eq!(
        result(&s, "after").await,
        ("DONE".into(), Some("7".into()), None)
    );
    let ran: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {schema}.ran"))
        .fetch_one(&s.db)
        .await
        .unwrap();
    assert_eq!(ran, 1);
    s.stop().await;
}

#[tokio::test]
async fn plan_delays_larger_max_goes_first_and_live_reuses_the_session() {
    let s = serve().await;
    let t = s.t();
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input, plan) VALUES ('later', 'SELECT 1', now() + interval '2 sec')"
    ))
    .await;
    // Inserted together: the task with the larger max starts first, and alone (max 1 allows two
    // at once only for tasks whose own max allows it).
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input, max, \"delete\") VALUES ('order', 'SELECT pg_sleep(0.3)', 0, false), ('order', 'SELECT pg_sleep(0.3)', 0, false), ('order', 'SELECT pg_sleep(0.3)', 1, false)"
    ))
    .await;
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input, live) SELECT 'live', 'SELECT 1', '30 sec' FROM generate_series(1, 3)"
    ))
    .await;
    for g in ["later", "order", "live"] {
        s.settled(g, Duration::from_secs(30)).await;
    }
    let late: bool = sqlx::query_scalar(&format!(
        "SELECT start >= plan AND plan > (SELECT min(plan) FROM {t}) + interval '1.5 sec' FROM {t} WHERE \"group\" = 'later'"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert!(late, "a planned task waits for its plan");
    let order: Vec<i32> = sqlx::query_scalar(&format!(
        "SELECT max FROM {t} WHERE \"group\" = 'order' ORDER BY start"
    ))
    .fetch_all(&s.db)
    .await
    .unwrap();
    assert_eq!(order, vec![1, 0, 0]);
    let pids: i64 = sqlx::query_scalar(&format!(
        "SELECT count(DISTINCT pid) FROM {t} WHERE \"group\" = 'live'"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert_eq!(
        pids, 1,
        "live lets one session run the group's tasks in turn"
    );
    s.stop().await;
}

/// pg_task's regression group 9 (sql/local.sql, expected/local.out): ten tasks `max 1, count 6`
/// and one `max 2, count 6` inserted together. pg_task runs the max-2 task alone in one session
/// (no other task of the group has max >= 2), and the ten in two sessions of 6 and 4.
#[tokio::test]
async fn regression_group_9_sessions() {
    let s = serve().await;
    let t = s.t();
    // One transaction: pg_task's expected output has its worker see the eleven at once (a claim
    // between the two statements would start two max-1 sessions before the max-2 task exists).
    s.exec(&format!(
        "BEGIN; WITH s AS (SELECT generate_series(1, 10) AS s) INSERT INTO {t} (\"group\", input, max, count) SELECT '9', 'SELECT pg_sleep(1) AS a', 1, 6 FROM s; \
         INSERT INTO {t} (\"group\", input, max, count) VALUES ('9', 'SELECT pg_sleep(1) AS a', 2, 6); COMMIT"
    ))
    .await;
    s.settled("9", Duration::from_secs(60)).await;
    let rows: Vec<(i32, i64)> = sqlx::query_as(&format!(
        "SELECT max, count(id) FROM {t} WHERE \"group\" = '9' GROUP BY max, pid ORDER BY max DESC, 2"
    ))
    .fetch_all(&s.db)
    .await
    .unwrap();
    let timeline: Vec<(i64, i32, i32, String, String)> = sqlx::query_as(&format!(
        "SELECT id, max, pid, to_char(start, 'SS.MS'), to_char(stop, 'SS.MS') FROM {t} WHERE \"group\" = '9' ORDER BY start"
    ))
    .fetch_all(&s.db)
    .await
    .unwrap();
    // pg_task's expected output has the ten split 6 + 4: its first session started a second
    // before the other and `count 6` ended it. Which session takes the tenth task is a race of
    // milliseconds when both free up in the same second (a loaded CI machine gave 5 + 5), so the
    // rule checked is: the max-2 task alone, the ten in two sessions, neither over its count.
    let sizes: Vec<i64> = rows.iter().filter(|r| r.0 == 1).map(|r| r.1).collect();
    assert!(
        rows.first() == Some(&(2, 1))
            && sizes.len() == 2
            && sizes.iter().sum::<i64>() == 10
            && sizes.iter().all(|n| *n <= 6),
        "sessions by max: {rows:?} {timeline:#?}"
    );
    // The max-2 task arriving while two max-1 sessions run: it starts beside them (2 running +
    // 1 <= 2 + 1), and when the two end their first tasks both go on — a going-on session keeps
    // its slot (pg_task's task.c counts no limit for it). Counting the max-2 task against them
    // ended one of them after a single task: the ten ran in three sessions.
    s.exec(&format!(
        "WITH s AS (SELECT generate_series(1, 10) AS s) INSERT INTO {t} (\"group\", input, max, count) SELECT '9b', 'SELECT pg_sleep(1) AS a', 1, 6 FROM s"
    ))
    .await;
    s.until(
        &format!("SELECT count(*) = 2 FROM {t} WHERE \"group\" = '9b' AND state = 'WORK'"),
        Duration::from_secs(30),
    )
    .await;
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input, max, count) VALUES ('9b', 'SELECT pg_sleep(1.5) AS a', 2, 6)"
    ))
    .await;
    s.settled("9b", Duration::from_secs(60)).await;
    let sessions: i64 = sqlx::query_scalar(&format!(
        "SELECT count(DISTINCT pid) FROM {t} WHERE \"group\" = '9b' AND max = 1"
    ))
    .fetch_one(&s.db)
    .await
    .unwrap();
    assert_eq!(sessions, 2, "the ten max-1 tasks in two sessions");
    s.stop().await;
}

/// An insert wakes the scheduler: with `sleep` at 60 s no look would come by polling, yet the
/// task runs at once (bound: 5 s on a loaded machine; typically milliseconds).
#[tokio::test]
async fn an_insert_wakes_the_scheduler() {
    let s = serve_with(1, |c| c.sleep = Duration::from_secs(60)).await;
    let t = s.t();
    // Let the first look pass, so only the insert's wake-up can start the task.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t0 = Instant::now();
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input) VALUES ('wake', 'SELECT 1')"
    ))
    .await;
    s.settled("wake", Duration::from_secs(5)).await;
    let waited = t0.elapsed();
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    s.stop().await;
}

/// A `task` table that exists before docket, with columns of its own and rows, is kept:
/// docket adds pg_task's missing columns and runs the rows; the extra column and its values
/// stay (pg_task's README: "you may add any needed columns").
#[tokio::test]
async fn an_existing_table_with_extra_columns_is_kept() {
    let schema = format!("pgt_{}", uuid::Uuid::new_v4().simple());
    let db = PgPoolOptions::new()
        .max_connections(2)
        .connect(&sqlx_url())
        .await
        .unwrap();
    sqlx::raw_sql(&format!(
        "CREATE SCHEMA {schema}; CREATE TABLE {schema}.task (id bigserial PRIMARY KEY, input text NOT NULL, note text DEFAULT 'kept'); \
         INSERT INTO {schema}.task (input, note) VALUES ('SELECT 41 + 1', 'mine')"
    ))
    .execute(&db)
    .await
    .unwrap();
    let s = serve_in(schema, 1, |_| {}).await;
    let t = s.t();
    s.exec(&format!(
        "INSERT INTO {t} (\"group\", input) VALUES ('new', 'SELECT 2')"
    ))
    .await;
    s.until(
        &format!("SELECT count(*) = 2 FROM {t} WHERE state = 'DONE'"),
        Duration::from_secs(30),
    )
    .await;
    let rows: Vec<(String, Option<String>, Option<String>)> =
        sqlx::query_as(&format!("SELECT input, output, note FROM {t} ORDER BY id"))
            .fetch_all(&db)
            .await
            .unwrap();
    assert_eq!(
        rows,
        vec![
            (
                "SELECT 41 + 1".into(),
                Some("42".into()),
                Some("mine".into())
            ),
            ("SELECT 2".into(), Some("2".into()), Some("kept".into())),
        ]
    );
    s.stop().await;
}

/// pg_task.limit and pg_task.fetch: read from the database's settings when not given (limit 0
/// takes nothing), an explicit option wins, and a look of fetch 1 still takes every due task.
#[tokio::test]
async fn limit_and_fetch_settings() {
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(&sqlx_url())
        .await
        .unwrap();
    // A database of its own (named like the idle test's, which scripts/test.sh cleans up).
    let dbname = format!("pgt_idle_{}", uuid::Uuid::new_v4().simple());
    for sql in [
        format!("CREATE DATABASE {dbname}"),
        format!("ALTER DATABASE {dbname} SET pg_task.\"limit\" = '0'"),
    ] {
        sqlx::raw_sql(&sql).execute(&admin).await.unwrap();
    }
    let db = PgPoolOptions::new()
        .max_connections(2)
        .connect(&format!(
            "postgres://postgres@127.0.0.1:{}/{dbname}",
            port()
        ))
        .await
        .unwrap();
    let base = PgTaskConfig::new(format!(
        "host=127.0.0.1 port={} user=postgres dbname={dbname}",
        port()
    ));
    let run = |cfg: PgTaskConfig| async move {
        let cancel = CancellationToken::new();
        let h = pgtask::start(cfg, "limit", cancel.clone(), Duration::from_secs(5))
            .await
            .unwrap();
        (cancel, h)
    };
    let (c, h) = run(base.clone()).await;
    sqlx::raw_sql("INSERT INTO task (\"group\", input) SELECT 'g' || i, 'SELECT ' || i FROM generate_series(1, 3) i")
        .execute(&db)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let waiting: i64 = sqlx::query_scalar("SELECT count(*) FROM task WHERE state = 'PLAN'")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(
        waiting, 3,
        "pg_task.limit = 0 (database setting) takes nothing"
    );
    c.cancel();
    let _ = h.await;
    let mut cfg = base;
    cfg.limit = Some(10);
    cfg.fetch = Some(1);
    let (c, h) = run(cfg).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let done: i64 = sqlx::query_scalar("SELECT count(*) FROM task WHERE state = 'DONE'")
            .fetch_one(&db)
            .await
            .unwrap();
        if done == 3 {
            break;
        }
        assert!(Instant::now() < deadline, "{done} of 3 done");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.cancel();
    let _ = h.await;
    db.close().await;
    let _ = sqlx::raw_sql(&format!("DROP DATABASE {dbname} WITH (FORCE)"))
        .execute(&admin)
        .await;
}

/// Issue 9: an idle table costs a look per `sleep`, not a busy loop (the statement trigger
/// fired on docket's own empty looks and woke the next one: ~2,450 commits/s). Measured on a
/// database of its own, so other tests' commits do not count.
#[tokio::test]
async fn an_idle_table_is_not_polled_in_a_busy_loop() {
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(&sqlx_url())
        .await
        .unwrap();
    let dbname = format!("pgt_idle_{}", uuid::Uuid::new_v4().simple());
    sqlx::raw_sql(&format!("CREATE DATABASE {dbname}"))
        .execute(&admin)
        .await
        .unwrap();
    let mut cfg = PgTaskConfig::new(format!(
        "host=127.0.0.1 port={} user=postgres dbname={dbname}",
        port()
    ));
    cfg.sleep = Duration::from_millis(500);
    let cancel = CancellationToken::new();
    let h = pgtask::start(cfg, "idle", cancel.clone(), Duration::from_secs(5))
        .await
        .unwrap();
    let commits = || async {
        sqlx::query_scalar::<_, i64>("SELECT xact_commit FROM pg_stat_database WHERE datname = $1")
            .bind(&dbname)
            .fetch_one(&admin)
            .await
            .unwrap()
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = commits().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = commits().await;
    cancel.cancel();
    let _ = h.await;
    let _ = sqlx::raw_sql(&format!("DROP DATABASE {dbname} WITH (FORCE)"))
        .execute(&admin)
        .await;
    // A look every 500 ms is ~10 looks of a few commits each; a busy loop is thousands.
    assert!(
        after - before < 200,
        "{} commits in 5 s on an idle table",
        after - before
    );
}
