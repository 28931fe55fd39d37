//! The `docket` binary as a user runs it: `serve`, `task`, `queue` and `worker` as separate
//! processes, on a real SQLite file, on PostgreSQL (own schema per test) and on MariaDB (own
//! database per test).

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_docket");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Sends `sig` to one process. (Never shell out to `kill` with a negative pid: procps-ng 4.0.2
/// turns `kill -SIG -PGID` into kill(-1, SIG), which signals every process on the machine.)
fn signal(pid: u32, sig: Signal) {
    let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), sig);
}

/// Sends `sig` to a process group.
fn signal_group(pgid: u32, sig: Signal) {
    assert!(pgid > 1);
    let _ = nix::sys::signal::killpg(Pid::from_raw(pgid as i32), sig);
}

/// A worker process (own process group) that is killed with its command when dropped.
struct Worker(Child);

impl Worker {
    fn id(&self) -> u32 {
        self.0.id()
    }

    fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.0.wait()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            signal_group(self.0.id(), Signal::SIGKILL);
            let _ = self.0.wait();
        }
    }
}

struct Server {
    child: Child,
    url: String,
    db: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn db_args(backend: &str, dir: &tempfile::TempDir) -> Vec<String> {
    match backend {
        "sqlite" => vec![
            "--database".into(),
            format!("sqlite://{}", dir.path().join("d.db").display()),
        ],
        "mysql" => {
            // A new database (scripts/test.sh drops what runs leave).
            use docket_store::testing::TestStore;
            let rt = tokio::runtime::Runtime::new().unwrap();
            let db = rt.block_on(async {
                let t = TestStore::mysql_with(1).await;
                t.store.close().await;
                t.schema.clone().unwrap()
            });
            vec!["--database".into(), TestStore::mysql_db_url(&db)]
        }
        _ => vec![
            "--database".into(),
            std::env::var("DOCKET_TEST_PG_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into()),
            "--schema".into(),
            format!("cli_{}", uuid::Uuid::new_v4().simple()),
        ],
    }
}

fn serve(backend: &str) -> Server {
    serve_with(backend, &[])
}

fn serve_with(backend: &str, extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let db = db_args(backend, &dir);
    let port = free_port();
    let child = Command::new(BIN)
        .arg("serve")
        .args(&db)
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--node",
            "cli-test",
        ])
        .args([
            "--rescue-interval",
            "200ms",
            "--poll-interval",
            "200ms",
            "--grace",
            "5s",
        ])
        .args(extra)
        .env("DOCKET_LOG", "warn")
        .current_dir(dir.path())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while http::blocking_get(&format!("{url}/healthz")).is_none() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    Server {
        child,
        url,
        db,
        _dir: dir,
    }
}

mod http {
    /// A tiny blocking GET over std (tests stay free of a second runtime).
    pub fn blocking_get(url: &str) -> Option<serde_json::Value> {
        use std::io::{Read, Write};
        let rest = url.strip_prefix("http://")?;
        let (host, path) = rest
            .split_once('/')
            .map(|(h, p)| (h, format!("/{p}")))
            .unwrap_or((rest, "/".into()));
        let mut s = std::net::TcpStream::connect(host).ok()?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).ok()?;
        let (head, body) = buf.split_once("\r\n\r\n")?;
        if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
            return None;
        }
        serde_json::from_str(body).ok()
    }

    /// A tiny blocking POST of a JSON body; the answer when it is 2xx.
    pub fn blocking_post(url: &str, body: &str) -> Option<serde_json::Value> {
        use std::io::{Read, Write};
        let rest = url.strip_prefix("http://")?;
        let (host, path) = rest.split_once('/')?;
        let mut s = std::net::TcpStream::connect(host).ok()?;
        write!(
            s,
            "POST /{path} HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).ok()?;
        let (head, body) = buf.split_once("\r\n\r\n")?;
        if !head.starts_with("HTTP/1.0 2") && !head.starts_with("HTTP/1.1 2") {
            return None;
        }
        serde_json::from_str(body).ok()
    }
}

impl Server {
    fn cli(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .env("DOCKET_SERVER", &self.url)
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.cli(args);
        assert!(
            o.status.success(),
            "docket {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    fn task(&self, id: i64) -> Value {
        serde_json::from_str(&self.ok(&["task", "show", &id.to_string()])).unwrap()
    }

    fn add(&self, args: &[&str]) -> i64 {
        let mut a = vec!["task", "add", "--json"];
        a.extend_from_slice(args);
        let v: Value = serde_json::from_str(&self.ok(&a)).unwrap();
        v["id"].as_i64().unwrap()
    }

    fn worker(&self, extra: &[&str], cmd: &[&str]) -> Worker {
        let mut c = Command::new(BIN);
        c.arg("worker").args(extra).arg("--").args(cmd);
        // Own process group, so a test can kill the worker and its command together.
        c.env("DOCKET_SERVER", &self.url)
            .env("DOCKET_LOG", "warn")
            .stdout(Stdio::null())
            .process_group(0);
        Worker(c.spawn().unwrap())
    }

    fn wait_for(&self, id: i64, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let t = self.task(id);
            if f(&t) {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {t}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

const ECHO: &str = r#"p=$(cat); case "$p" in *fail*) echo "bad input $p" >&2; exit 3;; esac; printf '{"id": %s, "attempt": %s, "queue": "%s", "trace": "%s", "echo": %s}' "$DOCKET_TASK_ID" "$DOCKET_TASK_ATTEMPT" "$DOCKET_QUEUE" "$DOCKET_TRACE_ID" "$p""#;

fn worker_runs_commands(backend: &str) {
    let s = serve(backend);
    let ok = s.add(&["--kind", "echo", "--payload", r#"{"n": 1}"#]);
    let text = s.add(&["--kind", "echo", "--payload", r#""plain""#]);
    let bad = s.add(&[
        "--kind",
        "echo",
        "--payload",
        r#""please fail""#,
        "--max-attempts",
        "1",
    ]);
    let mut w = s.worker(&["--concurrency", "2"], &["sh", "-c", ECHO]);
    let t = s.wait_for(ok, "completed", |t| t["state"] == "completed");
    let trace = t["trace_id"].as_str().unwrap().to_string();
    assert_eq!(trace.len(), 32, "every task has a trace id");
    assert_eq!(
        t["result"],
        json!({"id": ok, "attempt": 1, "queue": "default", "trace": trace, "echo": {"n": 1}})
    );
    let t = s.wait_for(text, "completed", |t| t["state"] == "completed");
    assert_eq!(t["result"]["echo"], "plain");
    let t = s.wait_for(bad, "discarded", |t| t["state"] == "discarded");
    let msg = t["errors"][0]["message"].as_str().unwrap();
    assert!(msg.starts_with("exit status 3: bad input"), "{msg}");
    signal(w.id(), Signal::SIGTERM);
    assert!(w.wait().unwrap().success(), "worker exits 0 on SIGTERM");
    // A non-JSON stdout is kept as a string.
    let raw = s.add(&["--kind", "x", "--payload", "1"]);
    let mut w = s.worker(&[], &["sh", "-c", "echo not json"]);
    let t = s.wait_for(raw, "completed", |t| t["state"] == "completed");
    assert_eq!(t["result"], "not json\n");
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
}

/// The command's side of `docket worker` (issue 21 item 10): DOCKET_WORKER and
/// DOCKET_TASK_STAGE in, and JSON lines in $DOCKET_CONTROL out — the next stage with a new
/// payload, a retry delay, a permanent failure, an error message, progress while it runs; a
/// bad line fails the attempt naming it. `--stage` claims only that stage.
fn worker_control_protocol(backend: &str) {
    let s = serve(backend);
    // The command's script is its payload's "do": each case says what to write.
    let script = r#"
        do=$(cat)
        case "$do" in
          *handoff*) [ "$DOCKET_TASK_STAGE" = a ] && echo '{"next_stage": "b", "payload": {"do": "handoff, now at b"}}' >> "$DOCKET_CONTROL"
                     echo '{"stage": "'"$DOCKET_TASK_STAGE"'", "worker": "'"$DOCKET_WORKER"'", "max": '"$DOCKET_TASK_MAX_ATTEMPTS"'}' ;;
          *later*) echo '{"retry_in": "1h", "error": "smtp down"}' >> "$DOCKET_CONTROL"; exit 1 ;;
          *never*) echo '{"permanent": true}' >> "$DOCKET_CONTROL"; exit 1 ;;
          *slow*) echo '{"progress": {"pct": 50}}' >> "$DOCKET_CONTROL"; sleep 2; echo '{"progress": {"pct": 100}}' >> "$DOCKET_CONTROL" ;;
          *garbled*) echo 'this is not json' >> "$DOCKET_CONTROL" ;;
          *) echo '"plain"' ;;
        esac"#;
    let add = |payload: &str, extra: &[&str]| {
        let mut a = vec!["--kind", "ctl", "--payload", payload];
        a.extend_from_slice(extra);
        s.add(&a)
    };
    let handoff = add(r#""handoff""#, &["--stage", "a", "--max-attempts", "4"]);
    // Only stage a is worked first: the task waits at b until a worker takes stage b.
    let mut wa = s.worker(&["--stage", "a", "--name", "wa"], &["sh", "-c", script]);
    let t = s.wait_for(handoff, "stage b", |t| t["stage"] == "b");
    assert_eq!(t["state"], "available", "{t}");
    assert_eq!(t["stages_done"], json!(["a"]));
    assert_eq!(t["payload"], json!({"do": "handoff, now at b"}));
    assert_eq!(t["result"], json!({"stage": "a", "worker": "wa", "max": 4}));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        s.task(handoff)["state"],
        "available",
        "a stage-a worker leaves stage b"
    );
    let pids = vec![wa.id()];
    signal(wa.id(), Signal::SIGTERM);
    wa.wait().unwrap();
    let later = add(r#""later""#, &[]);
    let never = add(r#""never""#, &["--max-attempts", "5"]);
    let slow = add(r#""slow""#, &[]);
    let garbled = add(r#""garbled""#, &["--max-attempts", "1"]);
    let mut w = s.worker(
        &["--name", "wb", "--concurrency", "4", "--lease", "900ms"],
        &["sh", "-c", script],
    );
    let t = s.wait_for(handoff, "completed at b", |t| t["state"] == "completed");
    assert_eq!(t["result"]["stage"], "b");
    let t = s.wait_for(later, "retryable", |t| t["state"] == "retryable");
    assert_eq!(t["errors"][0]["message"], "smtp down", "{t}");
    let at = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    let delay = at(&t["run_at"]) - at(&t["errors"][0]["at"]);
    assert!(
        (3599..=3601).contains(&delay.num_seconds()),
        "retry_in 1h, not the backoff: {t}"
    );
    let t = s.wait_for(never, "discarded", |t| t["state"] == "discarded");
    assert_eq!(t["attempt"], 1, "permanent: no second attempt of 5: {t}");
    // Progress is seen while the command runs (a heartbeat every lease/3 carries it).
    let t = s.wait_for(slow, "progress", |t| t["progress"] == json!({"pct": 50}));
    assert_eq!(t["state"], "running", "{t}");
    let t = s.wait_for(slow, "completed", |t| t["state"] == "completed");
    assert_eq!(
        t["progress"],
        json!({"pct": 100}),
        "the last progress is kept: {t}"
    );
    let t = s.wait_for(garbled, "discarded", |t| t["state"] == "discarded");
    let msg = t["errors"][0]["message"].as_str().unwrap();
    assert!(msg.contains("control file line 1"), "{msg}");
    let pids = [pids, vec![w.id()]].concat();
    signal(w.id(), Signal::SIGTERM);
    assert!(w.wait().unwrap().success());
    // The control files (named docket-control-<worker pid>-…) are gone.
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            pids.iter()
                .any(|p| n.starts_with(&format!("docket-control-{p}-")))
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Issue 9: names go into URL paths percent-encoded: a queue named `a/b c?` is its own queue
/// for `task add`, `queue pause/show` and `docket worker`.
fn odd_queue_names_reach_their_own_routes(backend: &str) {
    let s = serve(backend);
    let q = "a/b c?#%";
    let id = s.add(&["--kind", "x", "--queue", q, "--payload", "5"]);
    s.ok(&["queue", "pause", q]);
    let shown: Value = serde_json::from_str(&s.ok(&["queue", "show", q, "--json"])).unwrap();
    assert_eq!(shown["name"], q);
    assert_eq!(shown["settings"]["paused"], true);
    s.ok(&["queue", "resume", q]);
    let mut w = s.worker(&["--queue", q], &["cat"]);
    let t = s.wait_for(id, "completed", |t| t["state"] == "completed");
    assert_eq!(t["queue"], q);
    assert_eq!(t["result"], 5);
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
}

fn killed_worker_loses_nothing(backend: &str) {
    let s = serve(backend);
    s.ok(&[
        "queue",
        "set",
        "default",
        "--backoff-initial",
        "100ms",
        "--backoff-jitter",
        "0",
    ]);
    let id = s.add(&["--kind", "slow", "--payload", r#"{"x": 1}"#]);
    let mut w = s.worker(&["--lease", "1s"], &["sh", "-c", "sleep 60"]);
    s.wait_for(id, "running", |t| t["state"] == "running");
    // kill -9 the worker and its command: no goodbye, no complete, no fail.
    signal_group(w.id(), Signal::SIGKILL);
    w.wait().unwrap();
    let mut w2 = s.worker(&["--lease", "5s"], &["cat"]);
    let t = s.wait_for(id, "completed on a second attempt", |t| {
        t["state"] == "completed"
    });
    assert_eq!(t["attempt"], 2);
    assert_eq!(t["errors"][0]["message"], "lease expired");
    assert_eq!(t["result"], json!({"x": 1}));
    signal(w2.id(), Signal::SIGTERM);
    w2.wait().unwrap();
}

/// A TCP proxy to PostgreSQL that the test can cut: every connection through it is shut at
/// once, and new ones are refused (the database "goes away").
struct CutProxy {
    port: u16,
    conns: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl CutProxy {
    fn start() -> CutProxy {
        use std::net::{TcpListener, TcpStream};
        use std::sync::atomic::Ordering;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let conns = std::sync::Arc::new(std::sync::Mutex::new(Vec::<TcpStream>::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (c, st) = (conns.clone(), stop.clone());
        std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                let Ok((down, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                down.set_nonblocking(false).unwrap();
                let Ok(up) = TcpStream::connect("127.0.0.1:5432") else {
                    continue;
                };
                for (mut a, mut b) in [
                    (down.try_clone().unwrap(), up.try_clone().unwrap()),
                    (up.try_clone().unwrap(), down.try_clone().unwrap()),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut a, &mut b);
                        let _ = b.shutdown(std::net::Shutdown::Both);
                    });
                }
                c.lock().unwrap().extend([down, up]);
            }
        });
        CutProxy { port, conns, stop }
    }

    fn cut(&self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for s in self.conns.lock().unwrap().iter() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// `docket serve` whose database became unreachable still stops promptly on SIGTERM: the
/// maintenance pass, the namespace refresh and closing the pool do not wait out their 30 s
/// connection timeouts (before, it took minutes). Bound: 20 s with `--grace 2s`.
#[test]
fn serve_stops_promptly_when_the_database_is_gone() {
    let proxy = CutProxy::start();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = Command::new(BIN)
        .arg("serve")
        .args([
            "--database",
            &format!("postgres://postgres@127.0.0.1:{}/postgres", proxy.port),
            "--schema",
            &format!("cli_{}", uuid::Uuid::new_v4().simple()),
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--grace",
            "2s",
        ])
        .env("DOCKET_LOG", "warn")
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while http::blocking_get(&format!("http://127.0.0.1:{port}/healthz")).is_none() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    proxy.cut();
    // Let maintenance and the listener run into the outage.
    std::thread::sleep(Duration::from_secs(3));
    let t0 = Instant::now();
    signal(child.id(), Signal::SIGTERM);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            assert!(st.success(), "{st}");
            break;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("still running {:?} after SIGTERM", t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn serve_shuts_down_gracefully(backend: &str) {
    let mut s = serve(backend);
    let url = s.url.clone();
    let poll = std::thread::spawn(move || {
        let t = Instant::now();
        let out = Command::new("curl")
            .args([
                "-s",
                "-X",
                "POST",
                &format!("{url}/v1/queues/idle/claim"),
                "-H",
                "content-type: application/json",
            ])
            .args(["-d", r#"{"worker":"w","wait":"50s"}"#])
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stdout).to_string(),
            t.elapsed(),
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    signal(s.child.id(), Signal::SIGTERM);
    let (body, took) = poll.join().unwrap();
    assert_eq!(
        body.trim(),
        r#"{"tasks":[]}"#,
        "the long poll is answered, not cut"
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "serve did not exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    // The node registry says it stopped.
    let port = free_port();
    let mut again = Command::new(BIN)
        .arg("serve")
        .args(&s.db)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--node", "second"])
        .env("DOCKET_LOG", "warn")
        .current_dir(s._dir.path())
        .spawn()
        .unwrap();
    let url2 = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let nodes = loop {
        if let Some(v) = http::blocking_get(&format!("{url2}/v1/nodes")) {
            if v["nodes"].as_array().unwrap().len() == 2 {
                break v;
            }
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    };
    let first = nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "cli-test")
        .unwrap()
        .clone();
    assert_eq!(first["state"], "stopped", "{nodes}");
    let _ = again.kill();
    let _ = again.wait();
}

fn bulk_file_and_cli_errors(backend: &str) {
    let s = serve(backend);
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.jsonl");
    let lines: String = (0..2500)
        .map(|i| format!("{{\"kind\":\"bulk\",\"payload\":{i}}}\n"))
        .collect();
    std::fs::write(&good, lines).unwrap();
    let out = s.ok(&[
        "task",
        "add",
        "--file",
        good.to_str().unwrap(),
        "--queue",
        "bulk",
    ]);
    assert!(out.contains("enqueued 2500 tasks"), "{out}");
    let q: Value = serde_json::from_str(&s.ok(&["queue", "show", "bulk", "--json"])).unwrap();
    assert_eq!(q["counts"]["available"], 2500);
    // A bad line anywhere: nothing is sent, non-zero exit, the line is named.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"kind\":\"ok\"}\n{\"kind\": \n").unwrap();
    let o = s.cli(&[
        "task",
        "add",
        "--file",
        bad.to_str().unwrap(),
        "--queue",
        "bad",
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("bad.jsonl:2"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let q: Value = serde_json::from_str(&s.ok(&["queue", "show", "bad", "--json"])).unwrap();
    assert_eq!(q["counts"]["available"], 0);
    // Clear errors and non-zero exits.
    let o = s.cli(&["task", "show", "987654"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not_found"));
    let o = s.cli(&["task", "add", "--kind", "x", "--payload", "{oops"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--payload is not valid JSON"));
    let o = s.cli(&["task", "add", "--kind", "x", "--max-attempts", "0"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("max_attempts must be at least 1"));
    let o = s.cli(&["task", "add", "--kind", "x", "--run-in", "later"]);
    assert!(!o.status.success());
    // Table output lists tasks; pause/resume round trip.
    let out = s.ok(&["task", "list", "--queue", "bulk", "--limit", "3"]);
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(out.starts_with("ID"));
    s.ok(&["queue", "pause", "bulk"]);
    assert!(s.ok(&["queue", "list"]).contains("paused"));
    s.ok(&["queue", "resume", "bulk"]);
}

/// A URL of another scheme names the three that exist; a wrong password and a refused port are
/// one line each and a non-zero exit, at once (no retries until a pool timeout); a schema with a
/// MySQL URL is refused; a missing MySQL database is created.
#[test]
fn serve_refuses_unknown_database() {
    let run = |url: &str, extra: &[&str]| {
        let t0 = Instant::now();
        let o = Command::new(BIN)
            .args(["migrate", "--database", url])
            .args(extra)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{url}");
        assert!(
            t0.elapsed() < Duration::from_secs(8),
            "{url}: {:?}",
            t0.elapsed()
        );
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(err.trim().lines().count(), 1, "{url}: {err}");
        err
    };
    let e = run("redis://127.0.0.1/0", &[]);
    assert!(e.contains("unsupported database URL"), "{e}");
    for scheme in ["postgres://", "mysql://", "sqlite://"] {
        assert!(e.contains(scheme), "{e}");
    }
    let mysql = docket_store::testing::TestStore::mysql_url();
    let server = mysql
        .rsplit_once('/')
        .map_or(mysql.as_str(), |x| x.0)
        .to_string();
    let e = run(&server.replacen("://root@", "://root:wrong@", 1), &[]);
    let e2 = run(&format!("{server}/test"), &["--schema", "s"]);
    assert!(e2.contains("name the database in the URL"), "{e2}");
    // A database that does not exist is created (one docket may name, like a SQLite file).
    let fresh = format!("cli_{}", uuid::Uuid::new_v4().simple());
    let o = Command::new(BIN)
        .args(["migrate", "--database", &format!("{server}/{fresh}")])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let e3 = run(&format!("{server}/not-a-plain-name"), &[]);
    assert!(e3.contains("bad database name"), "{e3}");
    let e4 = run(&format!("mysql://root@127.0.0.1:{}/test", free_port()), &[]);
    assert!(e4.contains("Connection refused"), "{e4}");
    // Only when the test server's root has no password is "wrong" really wrong.
    if server.contains("://root@") {
        assert!(e.contains("Access denied"), "{e}");
    }
}

/// Issue 21 item 2: three `docket serve` started at the same moment on a fresh database all come
/// up (migrations are serialised across processes: MariaDB ignored sqlx's lock and one node died
/// with 1062 on _sqlx_migrations) and agree on the schema (a later `docket migrate` finds every
/// migration applied with its checksum; a task added through one is seen through the others).
fn nodes_started_together_agree_on_the_schema(backend: &str) {
    for round in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let db: Vec<String> = match backend {
            "mysql" => {
                let url = docket_store::testing::TestStore::mysql_url();
                let server = url
                    .rsplit_once('/')
                    .map_or(url.as_str(), |x| x.0)
                    .to_string();
                vec![
                    "--database".into(),
                    format!("{server}/cli_{}", uuid::Uuid::new_v4().simple()),
                ]
            }
            _ => db_args(backend, &dir),
        };
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let mut nodes: Vec<Worker> = ports
            .iter()
            .enumerate()
            .map(|(i, port)| {
                let mut c = Command::new(BIN);
                c.arg("serve")
                    .args(&db)
                    .args(["--listen", &format!("127.0.0.1:{port}")])
                    .args(["--node", &format!("n{i}")])
                    .env("DOCKET_LOG", "warn")
                    .current_dir(dir.path())
                    .stdout(Stdio::null())
                    .stderr(std::fs::File::create(dir.path().join(format!("n{i}.err"))).unwrap())
                    .process_group(0);
                Worker(c.spawn().unwrap())
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        for (i, port) in ports.iter().enumerate() {
            while http::blocking_get(&format!("http://127.0.0.1:{port}/healthz")).is_none() {
                if let Some(st) = nodes[i].0.try_wait().unwrap() {
                    let err = std::fs::read_to_string(dir.path().join(format!("n{i}.err")));
                    panic!("round {round}: node n{i} exited: {st}: {err:?}");
                }
                assert!(
                    Instant::now() < deadline,
                    "round {round}: node n{i} did not start"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let o = Command::new(BIN).arg("migrate").args(&db).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let add = Command::new(BIN)
            .args(["task", "add", "--kind", "k", "--json"])
            .env("DOCKET_SERVER", format!("http://127.0.0.1:{}", ports[0]))
            .output()
            .unwrap();
        assert!(
            add.status.success(),
            "{}",
            String::from_utf8_lossy(&add.stderr)
        );
        let id = serde_json::from_slice::<Value>(&add.stdout).unwrap()["id"].clone();
        for port in &ports[1..] {
            let t = http::blocking_get(&format!("http://127.0.0.1:{port}/v1/tasks/{id}"))
                .expect("the task through another node");
            assert_eq!(t["id"], id);
        }
        for (i, n) in nodes.iter_mut().enumerate() {
            assert!(n.0.try_wait().unwrap().is_none(), "every node still runs");
            let err = std::fs::read_to_string(dir.path().join(format!("n{i}.err"))).unwrap();
            assert!(!err.contains("panicked"), "round {round}, n{i}: {err}");
        }
    }
}

/// Issue 21 item 12: `docket task add --expires-in/--expires-at` (a task not started in time is
/// discarded) and `docket schedule add --after-end`.
fn expiry_and_after_end_from_the_cli(backend: &str) {
    let s = serve(backend);
    let id = s.add(&["--kind", "late", "--queue", "nobody", "--expires-in", "1s"]);
    let t = s.task(id);
    let at = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    let window = at(&t["expires_at"]) - at(&t["created_at"]);
    assert!(
        (999..=1001).contains(&window.num_milliseconds()),
        "expires 1 s after the enqueue: {t}"
    );
    // Nobody works queue `nobody`: past its expiry the task is discarded, never run.
    let t = s.wait_for(id, "expiry", |t| t["state"] == "discarded");
    assert_eq!(t["attempt"], 0, "{t}");
    let id = s.add(&["--kind", "k", "--expires-at", "2999-01-01T00:00:00Z"]);
    assert_eq!(s.task(id)["expires_at"], "2999-01-01T00:00:00Z");
    let o = s.cli(&[
        "task",
        "add",
        "--kind",
        "k",
        "--expires-in",
        "1h",
        "--expires-at",
        "2999-01-01T00:00:00Z",
    ]);
    assert!(!o.status.success());
    let o = s.cli(&[
        "task",
        "add",
        "--kind",
        "k",
        "--run-in",
        "1h",
        "--expires-in",
        "1m",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("could never start"));
    // A schedule counted from the end of its last run.
    let out = s.ok(&[
        "schedule",
        "add",
        "sleepy",
        "--every",
        "1h",
        "--after-end",
        "--kind",
        "nap",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["after_end"], true, "{v}");
    let o = s.cli(&[
        "schedule",
        "add",
        "both",
        "--every",
        "1h",
        "--after-end",
        "--drift",
        "--kind",
        "nap",
    ]);
    assert!(!o.status.success());
}

/// Issue 12: `docket worker --kind K` (repeatable) claims only those kinds; other tasks wait.
fn worker_claims_only_its_kinds(backend: &str) {
    let s = serve(backend);
    let a = s.add(&["--kind", "resize", "--payload", "1"]);
    let b = s.add(&["--kind", "thumb", "--payload", "2"]);
    let c = s.add(&["--kind", "email", "--payload", "3"]);
    let mut w = s.worker(&["--kind", "resize", "--kind", "thumb"], &["cat"]);
    s.wait_for(a, "completed", |t| t["state"] == "completed");
    s.wait_for(b, "completed", |t| t["state"] == "completed");
    std::thread::sleep(Duration::from_millis(500));
    let t = s.task(c);
    assert_eq!(
        (t["state"].as_str(), t["attempt"].as_i64()),
        (Some("available"), Some(0)),
        "{t}"
    );
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
}

/// Issue 9: at the task's timeout the worker sends SIGTERM to the command's whole process
/// group (a child the command started goes too) and fails the attempt with `timeout`.
fn worker_enforces_the_timeout(backend: &str) {
    let s = serve(backend);
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("child");
    let id = s.add(&["--kind", "hang", "--timeout", "1s", "--max-attempts", "1"]);
    let script = format!("sleep 600 & echo $! > {}; wait", pidfile.display());
    let t0 = Instant::now();
    let mut w = s.worker(
        &["--lease", "30s", "--kill-grace", "2s"],
        &["sh", "-c", &script],
    );
    let t = s.wait_for(id, "discarded by its timeout", |t| {
        t["state"] == "discarded"
    });
    assert_eq!(t["errors"][0]["message"], "timeout", "{t}");
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t0.elapsed()
    );
    let child: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    // The grandchild is gone (a zombie until init reaps it counts as gone: kill(0) on it
    // succeeds, so look at its state instead).
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next()
            .unwrap_or("");
        if stat.is_empty() || state == "Z" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the command's child {child} survived the timeout: {stat}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
}

/// Issue 9: a worker whose report meets a server that is down (restarting) retries it while
/// the lease lasts: the finished work is not lost and does not run again.
fn worker_retries_reports_across_a_server_restart(backend: &str) {
    let mut s = serve(backend);
    let id = s.add(&["--kind", "slow", "--payload", "7"]);
    let mut w = s.worker(&["--lease", "60s"], &["sh", "-c", "sleep 2; cat"]);
    s.wait_for(id, "running", |t| t["state"] == "running");
    // The node dies while the command runs, and comes back after the command has finished.
    let _ = s.child.kill();
    let _ = s.child.wait();
    std::thread::sleep(Duration::from_secs(4));
    let port = s.url.rsplit(':').next().unwrap().to_string();
    s.child = Command::new(BIN)
        .arg("serve")
        .args(&s.db)
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--node",
            "cli-test",
        ])
        .env("DOCKET_LOG", "warn")
        .current_dir(s._dir.path())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while http::blocking_get(&format!("{}/healthz", s.url)).is_none() {
        assert!(Instant::now() < deadline, "server did not come back");
        std::thread::sleep(Duration::from_millis(100));
    }
    let t = s.wait_for(id, "completed by the first attempt", |t| {
        t["state"] == "completed"
    });
    assert_eq!(t["attempt"], 1, "{t}");
    assert_eq!(t["result"], 7);
    assert_eq!(t["errors"], json!([]), "{t}");
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
}

/// Issue 12 item 8: a linear backoff (node-daemons' delayRatio) per queue and per task from the
/// CLI; a backoff that does not parse is refused with its flag named.
fn linear_backoff_from_the_cli(backend: &str) {
    let s = serve(backend);
    let q: Value = serde_json::from_str(&s.ok(&[
        "queue",
        "set",
        "lin",
        "--backoff-kind",
        "linear",
        "--backoff-initial",
        "30s",
        "--backoff-max",
        "2m",
    ]))
    .unwrap();
    assert_eq!(q["backoff"]["kind"], "linear", "{q}");
    assert_eq!(q["backoff"]["initial"], "30s", "{q}");
    // A task of that queue takes it; a task may bring its own.
    let a = s.add(&["--kind", "k", "--queue", "lin"]);
    assert_eq!(s.task(a)["backoff"]["kind"], "linear");
    let b = s.add(&[
        "--kind",
        "k",
        "--backoff",
        r#"{"kind": "linear", "step": "10s", "max": "1m"}"#,
    ]);
    let t = s.task(b);
    assert_eq!(
        (
            t["backoff"]["kind"].as_str(),
            t["backoff"]["initial"].as_str()
        ),
        (Some("linear"), Some("10s")),
        "{t}"
    );
    for bad in [r#"{"kind": "quadratic"}"#, "not json"] {
        let o = s.cli(&["task", "add", "--kind", "k", "--backoff", bad]);
        assert!(!o.status.success(), "{bad}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--backoff"),
            "{bad}"
        );
    }
}

/// Issue 12 item 4: asyncflow's user task lists from the CLI: `--user-id` on add, and a list of
/// one user's tasks in several states; a bad user id is refused naming the field.
fn user_task_lists_from_the_cli(backend: &str) {
    let s = serve(backend);
    let a = s.add(&["--kind", "k", "--user-id", "noob"]);
    let _b = s.add(&["--kind", "k", "--user-id", "other"]);
    let c = s.add(&["--kind", "k", "--user-id", "noob", "--run-in", "1h"]);
    assert_eq!(s.task(a)["user_id"], "noob");
    let list = |args: &[&str]| -> Vec<i64> {
        let mut v = vec!["task", "list", "--json"];
        v.extend_from_slice(args);
        let out: Value = serde_json::from_str(&s.ok(&v)).unwrap();
        out.as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(list(&["--user-id", "noob"]), vec![a, c]);
    assert_eq!(
        list(&["--user-id", "noob", "--state", "scheduled,running"]),
        vec![c]
    );
    assert!(list(&["--user-id", "nobody"]).is_empty());
    let o = s.cli(&["task", "add", "--kind", "k", "--user-id", "a\u{7}b"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("user_id"));
}

/// Issue 37 item 7: `docket task list --trace-id / --unique-key / --worker` find exactly their
/// tasks (a trace id in either case, finished tasks too), alone and with the other flags.
fn task_search_from_the_cli(backend: &str) {
    let s = serve(backend);
    let a = s.add(&[
        "--queue",
        "sq",
        "--kind",
        "k",
        "--payload",
        "1",
        "--unique-key",
        "ua",
    ]);
    let b = s.add(&["--queue", "sq", "--kind", "k", "--payload", "2"]);
    let c = s.add(&["--queue", "other", "--kind", "k", "--unique-key", "uc"]);
    // A worker named search-w runs a and b; c waits in a queue no worker takes.
    let w = s.worker(&["--queue", "sq", "--name", "search-w"], &["cat"]);
    for id in [a, b] {
        s.wait_for(id, "completed", |t| t["state"] == "completed");
    }
    drop(w);
    let trace_a = s.task(a)["trace_id"].as_str().unwrap().to_string();
    let trace_c = s.task(c)["trace_id"].as_str().unwrap().to_string();
    assert_ne!(trace_a, trace_c);
    let list = |args: &[&str]| -> Vec<i64> {
        let mut v = vec!["task", "list", "--json"];
        v.extend_from_slice(args);
        let out: Value = serde_json::from_str(&s.ok(&v)).unwrap();
        out.as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(list(&["--trace-id", &trace_a]), vec![a]);
    assert_eq!(
        list(&["--trace-id", &trace_a.to_ascii_uppercase()]),
        vec![a]
    );
    assert_eq!(list(&["--trace-id", &trace_c]), vec![c]);
    assert!(list(&["--trace-id", &trace_c, "--queue", "sq"]).is_empty());
    assert_eq!(list(&["--unique-key", "ua"]), vec![a]);
    assert_eq!(
        list(&["--unique-key", "uc", "--state", "available"]),
        vec![c]
    );
    assert!(list(&["--unique-key", "uc", "--state", "completed"]).is_empty());
    assert!(list(&["--unique-key", "nobody"]).is_empty());
    assert_eq!(list(&["--worker", "search-w"]), vec![a, b]);
    assert_eq!(list(&["--worker", "search-w", "--desc"]), vec![b, a]);
    assert_eq!(
        list(&["--worker", "search-w", "--trace-id", &trace_a]),
        vec![a]
    );
    assert!(list(&["--worker", "search-w", "--unique-key", "uc"]).is_empty());
    assert!(list(&["--worker", "nobody"]).is_empty());
    // The table names the task it found.
    let table = s.ok(&["task", "list", "--unique-key", "uc"]);
    assert!(
        table.lines().count() == 2 && table.contains("other"),
        "{table}"
    );
}

/// Issue 26 item 2: `docket batch create/add/seal/show/list`; a bad spec is one clear line and
/// a non-zero exit.
fn batches_from_the_cli(backend: &str) {
    let s = serve(backend);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("batch.json");
    std::fs::write(
        &spec,
        r#"{"name": "nightly", "open": true, "tasks": [{"kind": "a"}],
            "callbacks": {"completed": {"kind": "report", "payload": {"to": "ops"}}}}"#,
    )
    .unwrap();
    let out: Value =
        serde_json::from_str(&s.ok(&["batch", "create", spec.to_str().unwrap(), "--json"]))
            .unwrap();
    let id = out["batch"]["id"].as_i64().unwrap();
    assert_eq!(out["batch"]["open"], true);
    assert_eq!(
        s.task(out["tasks"][0]["id"].as_i64().unwrap())["batch_id"],
        id
    );
    let more = dir.path().join("more.json");
    std::fs::write(&more, r#"[{"kind": "b"}, {"kind": "c"}]"#).unwrap();
    let out: Value = serde_json::from_str(&s.ok(&[
        "batch",
        "add",
        &id.to_string(),
        more.to_str().unwrap(),
        "--seal",
        "--json",
    ]))
    .unwrap();
    assert_eq!(out["batch"]["total"], 3);
    assert_eq!(out["batch"]["open"], false);
    let shown: Value =
        serde_json::from_str(&s.ok(&["batch", "show", &id.to_string(), "--json"])).unwrap();
    assert_eq!(shown["counts"]["available"], 3);
    let table = s.ok(&["batch", "list"]);
    assert!(
        table.contains("nightly") && table.contains("0/3"),
        "{table}"
    );
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"tasks": [{"kind": "a", "unique_key": "u"}]}"#).unwrap();
    let o = s.cli(&["batch", "create", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unique_key"));
    let o = s.cli(&["batch", "show", "999999"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not found"));
}

/// Issue 26 item 4: `docket queue set Q --fair true --partition-weight P=W --partition-limit N`
/// and `task add --partition-key`; a bad weight is one clear line and a non-zero exit. The
/// settings reach claims: a `docket worker` of five takes, in its first claim, acme's first
/// three (weight 3) and beta's and gamma's first — not the first five in claim order (acme's
/// four, then beta's) — and under a partition limit of 2, two of acme's and beta's one.
fn fair_queues_from_the_cli(backend: &str) {
    let s = serve(backend);
    s.ok(&[
        "queue",
        "set",
        "fq",
        "--fair",
        "true",
        "--partition-weight",
        "acme=3",
    ]);
    let add = |p: &str, n: usize| -> Vec<i64> {
        (0..n)
            .map(|_| s.add(&["--kind", "k", "--queue", "fq", "--partition-key", p]))
            .collect()
    };
    let (acme, beta, gamma) = (add("acme", 4), add("beta", 2), add("gamma", 1));
    let first = first_claim_of_a_worker(&s, [&acme[..], &beta, &gamma].concat());
    let mut want = vec![acme[0], acme[1], acme[2], beta[0], gamma[0]];
    want.sort_unstable();
    assert_eq!(first, want, "acme {acme:?} beta {beta:?} gamma {gamma:?}");

    s.ok(&["queue", "set", "fq", "--partition-limit", "2"]);
    let q: Value = serde_json::from_str(&s.ok(&["queue", "show", "fq", "--json"])).unwrap();
    assert_eq!(q["settings"]["fair"], true, "{q}");
    assert_eq!(q["settings"]["partition_weights"]["acme"], 3, "{q}");
    assert_eq!(q["settings"]["partition_limit"], 2, "{q}");
    let id = s.add(&["--kind", "k", "--queue", "fq", "--partition-key", "acme"]);
    let t = s.task(id);
    assert_eq!(t["partition_key"], "acme");
    assert_eq!(t["concurrency_key"], "partition:fq:acme");
    let (acme, beta) = ([vec![id], add("acme", 2)].concat(), add("beta", 1));
    let first = first_claim_of_a_worker(&s, [&acme[..], &beta].concat());
    assert_eq!(
        first,
        vec![acme[0], acme[1], beta[0]],
        "acme {acme:?} beta {beta:?}"
    );

    let o = s.cli(&["queue", "set", "fq", "--partition-weight", "acme=0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("partition_weights"));
    let o = s.cli(&["queue", "set", "fq", "--partition-weight", "acme"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("PARTITION=WEIGHT"));
}

/// Runs `docket worker --queue fq --concurrency 5 -- cat` until tasks `ids` completed, stops it,
/// and returns the ids its first claim took (sorted): the tasks of the earliest `attempted_at`
/// (a claim gives its tasks one).
fn first_claim_of_a_worker(s: &Server, ids: Vec<i64>) -> Vec<i64> {
    let mut w = s.worker(&["--queue", "fq", "--concurrency", "5"], &["cat"]);
    let done: Vec<(String, i64)> = ids
        .iter()
        .map(|id| {
            let t = s.wait_for(*id, "completed", |t| t["state"] == "completed");
            (t["attempted_at"].as_str().unwrap().to_string(), *id)
        })
        .collect();
    signal(w.id(), Signal::SIGTERM);
    assert!(w.wait().unwrap().success());
    let earliest = done.iter().map(|(at, _)| at.clone()).min().unwrap();
    let mut first: Vec<i64> = done
        .into_iter()
        .filter(|(at, _)| *at == earliest)
        .map(|(_, id)| id)
        .collect();
    first.sort_unstable();
    first
}

/// Issue 26 item 3: `docket rate-limit set/list/show/delete`; a task names a limit with
/// `--rate-limit-key`; a task naming no limit, and a bad spec, are one clear line and a non-zero
/// exit.
fn rate_limits_from_the_cli(backend: &str) {
    let s = serve(backend);
    let l: Value = serde_json::from_str(&s.ok(&[
        "rate-limit",
        "set",
        "stripe",
        "--kind",
        "window",
        "--limit",
        "1",
        "--period",
        "1h",
        "--json",
    ]))
    .unwrap();
    assert_eq!(
        (l["kind"].as_str(), l["limit"].as_i64()),
        (Some("window"), Some(1))
    );
    assert_eq!(l["period"], "1h");
    s.ok(&[
        "rate-limit",
        "set",
        "pdf",
        "--kind",
        "concurrent",
        "--limit",
        "3",
    ]);
    let a = s.add(&[
        "--kind",
        "charge",
        "--queue",
        "rl",
        "--rate-limit-key",
        "stripe:acme",
    ]);
    let b = s.add(&[
        "--kind",
        "charge",
        "--queue",
        "rl",
        "--rate-limit-key",
        "stripe:acme",
    ]);
    assert_eq!(s.task(a)["rate_limit"], "stripe:acme");
    assert_eq!(s.task(b)["state"], "available");
    let shown: Value =
        serde_json::from_str(&s.ok(&["rate-limit", "show", "stripe", "--json"])).unwrap();
    assert_eq!(shown["name"], "stripe");
    let table = s.ok(&["rate-limit", "list"]);
    assert!(table.contains("stripe") && table.contains("pdf"), "{table}");
    assert!(table.contains("concurrent"), "{table}");
    let o = s.cli(&["task", "add", "--kind", "x", "--rate-limit-key", "nosuch"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nosuch"));
    let o = s.cli(&["rate-limit", "set", "x", "--kind", "window", "--limit", "5"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("period"));
    s.ok(&["rate-limit", "delete", "pdf"]);
    let o = s.cli(&["rate-limit", "show", "pdf"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not found"));
}

/// Issue 26 item 1: `docket workflow create/show/cancel/retry/add`; a cycle or a ref given
/// twice is one clear line and a non-zero exit.
fn workflows_from_the_cli(backend: &str) {
    let s = serve(backend);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("wf.json");
    std::fs::write(
        &spec,
        r#"{"name": "etl", "tasks": [{"ref": "x", "kind": "extract"},
            {"ref": "y", "kind": "load", "depends_on": ["x"]},
            {"ref": "z", "kind": "report", "depends_on": [{"ref": "y", "ignore_failure": true}]}]}"#,
    )
    .unwrap();
    let out: Value =
        serde_json::from_str(&s.ok(&["workflow", "create", spec.to_str().unwrap(), "--json"]))
            .unwrap();
    let id = out["workflow"]["batch"]["id"].as_i64().unwrap();
    let table = s.ok(&["workflow", "show", &id.to_string()]);
    assert!(
        table.contains("etl") && table.contains("waiting"),
        "{table}"
    );
    assert!(table.contains("y (ignore failure)"), "{table}");
    let w: Value =
        serde_json::from_str(&s.ok(&["workflow", "cancel", &id.to_string(), "--json"])).unwrap();
    assert!(w["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["state"] == "cancelled"));
    // Retry: x runs again now, y and z wait for it again.
    let w: Value =
        serde_json::from_str(&s.ok(&["workflow", "retry", &id.to_string(), "--json"])).unwrap();
    let states: Vec<(&str, bool)> = w["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["state"].as_str().unwrap(), t["waiting"] == true))
        .collect();
    assert_eq!(
        states,
        [
            ("available", false),
            ("scheduled", true),
            ("scheduled", true)
        ],
        "{w}"
    );
    // Tasks and a sub-workflow added at run time, after x.
    let more = dir.path().join("more.json");
    std::fs::write(
        &more,
        r#"{"tasks": [{"ref": "w", "kind": "k", "depends_on": ["x"]}],
            "workflows": [{"ref": "s", "depends_on": ["w"], "tasks": [{"ref": "q", "kind": "k"}]}]}"#,
    )
    .unwrap();
    let table = s.ok(&["workflow", "add", &id.to_string(), more.to_str().unwrap()]);
    assert!(table.contains("added 2 task(s)"), "{table}");
    assert!(table.contains("s/q") && table.contains("w "), "{table}");
    let o = s.cli(&["workflow", "add", &id.to_string(), more.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("already in the workflow"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let bad = dir.path().join("cycle.json");
    std::fs::write(
        &bad,
        r#"{"tasks": [{"ref": "a", "kind": "k", "depends_on": ["b"]}, {"ref": "b", "kind": "k", "depends_on": ["a"]}]}"#,
    )
    .unwrap();
    let o = s.cli(&["workflow", "create", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cycle"));
}

/// Issue 12 item 11: `docket node drain NAME [--to OTHER]` moves the node's pinned waiting
/// tasks and marks it draining; `docket node resume NAME` ends it; an unknown node is an error.
fn node_drain_from_the_cli(backend: &str) {
    let s = serve(backend);
    let nodes: Value = serde_json::from_str(&s.ok(&["node", "--json"])).unwrap();
    let me = nodes[0]["name"].as_str().unwrap().to_string();
    let id = s.add(&["--kind", "k", "--node", &me, "--run-in", "1h"]);
    let v: Value = serde_json::from_str(&s.ok(&["node", "drain", &me])).unwrap();
    assert_eq!(
        (v["draining"].as_bool(), v["moved"].as_u64()),
        (Some(true), Some(1)),
        "{v}"
    );
    assert_eq!(s.task(id)["node"], Value::Null, "may run anywhere now");
    let nodes: Value = serde_json::from_str(&s.ok(&["node", "--json"])).unwrap();
    assert_eq!(nodes[0]["state"], "draining", "{nodes}");
    let v: Value = serde_json::from_str(&s.ok(&["node", "resume", &me])).unwrap();
    assert_eq!(v["draining"], false);
    let o = s.cli(&["node", "drain", "no-such-node"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not_found"));
}

/// Issue 12 items 1 and 3: `docket task add --stage`, `docket task set` changes a waiting task
/// (a stale `--if-version` changes nothing and exits non-zero), `task show` shows the stage.
fn task_set_and_stages_from_the_cli(backend: &str) {
    let s = serve(backend);
    let id = s.add(&["--kind", "k", "--stage", "fetch", "--run-in", "1h"]);
    let t = s.task(id);
    assert_eq!(t["stage"], "fetch");
    let task: docket_core::Task = serde_json::from_value(t).unwrap();
    let v0 = docket_core::patch::version(&task);
    let out: Value = serde_json::from_str(&s.ok(&[
        "task",
        "set",
        &id.to_string(),
        "--priority",
        "-3",
        "--run-in",
        "0s",
        "--stage",
        "ship",
        "--queue",
        "elsewhere",
        "--if-version",
        &v0,
        "--json",
    ]))
    .unwrap();
    assert_eq!(
        (
            out["priority"].as_i64(),
            out["state"].as_str(),
            out["stage"].as_str(),
            out["queue"].as_str()
        ),
        (Some(-3), Some("available"), Some("ship"), Some("elsewhere")),
        "{out}"
    );
    let o = s.cli(&[
        "task",
        "set",
        &id.to_string(),
        "--priority",
        "1",
        "--if-version",
        &v0,
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("version_mismatch"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        s.task(id)["priority"],
        -3,
        "a refused change changes nothing"
    );
    let o = s.cli(&["task", "set", &id.to_string()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing to change"));
    let shown: Value = serde_json::from_str(&s.ok(&["task", "show", &id.to_string()])).unwrap();
    assert_eq!(shown["stage"], "ship");
    assert_eq!(shown["runs"], serde_json::json!([]));
    // Worked by `docket worker`: `task show` has the attempt in its run log.
    let mut w = s.worker(
        &["--queue", "elsewhere", "--name", "w-log"],
        &["sh", "-c", "cat > /dev/null; echo done"],
    );
    let t = s.wait_for(id, "completed", |t| t["state"] == "completed");
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
    assert_eq!(t["run_count"], 1);
    let run = &t["runs"][0];
    assert_eq!(
        (
            run["outcome"].as_str(),
            run["stage"].as_str(),
            run["worker"].as_str(),
            run["attempt"].as_i64()
        ),
        (Some("completed"), Some("ship"), Some("w-log"), Some(1)),
        "{t}"
    );
    assert_eq!(run["node"], "cli-test");
    assert_eq!(run["trace_id"].as_str().map(str::len), Some(32));
}

/// Issue 12 item 7: `docket serve --compat asyncflow` mounts asyncflow's routes; without the
/// flag they are not there.
fn compat_asyncflow_from_the_cli(backend: &str) {
    let on = serve_with(backend, &["--compat", "asyncflow"]);
    let v = http::blocking_get(&format!("{}/api/task/getTaskList?limit=5", on.url))
        .expect("the compat route answers 200");
    assert_eq!(
        (v["code"].as_i64(), v["msg"].as_str()),
        (Some(0), Some("ok")),
        "{v}"
    );
    assert_eq!(v["result"]["taskList"], serde_json::json!([]));
    let off = serve(backend);
    assert!(http::blocking_get(&format!("{}/api/task/getTaskList", off.url)).is_none());
    let o = Command::new(BIN)
        .args(["serve", "--compat", "nosuch"])
        .output()
        .unwrap();
    assert!(!o.status.success());
}

/// Issue 12 item 6: asyncflow's t_schedule_cfg from the CLI, under docket's names and
/// asyncflow's (`--max-retry-num`, `--retry-interval`, …); the queue shows when its settings
/// were created and changed; out-of-range values are refused naming the field.
fn schedule_cfg_from_the_cli(backend: &str) {
    let s = serve(backend);
    s.ok(&[
        "queue",
        "set",
        "lark",
        "--schedule-limit",
        "100",
        "--schedule-interval",
        "10s",
        "--max-processing-time",
        "30s",
        "--max-retry-num",
        "3",
        "--retry-interval",
        "10s",
        "--max-retry-interval",
        "30s",
    ]);
    let q: Value = serde_json::from_str(&s.ok(&["queue", "show", "lark", "--json"])).unwrap();
    let st = &q["settings"];
    assert_eq!(
        (
            st["schedule_limit"].as_i64(),
            st["schedule_interval"].as_str(),
            st["timeout"].as_str(),
            st["max_attempts"].as_i64(),
            st["backoff"]["initial"].as_str(),
            st["backoff"]["max"].as_str(),
        ),
        (
            Some(100),
            Some("10s"),
            Some("30s"),
            Some(3),
            Some("10s"),
            Some("30s")
        ),
        "{q}"
    );
    let created = q["created_at"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(20));
    s.ok(&["queue", "set", "lark", "--schedule-limit", "0"]);
    let q: Value = serde_json::from_str(&s.ok(&["queue", "show", "lark", "--json"])).unwrap();
    assert_eq!(q["settings"]["schedule_limit"], Value::Null, "0 clears it");
    assert_eq!(q["created_at"].as_str(), Some(created.as_str()));
    assert!(q["updated_at"].as_str().unwrap() > created.as_str(), "{q}");
    for (flag, v) in [
        ("--schedule-limit", "10001"),
        ("--schedule-interval", "1ms"),
    ] {
        let o = s.cli(&["queue", "set", "lark", flag, v]);
        assert!(!o.status.success(), "{flag} {v}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(&flag[2..].replace('-', "_")), "{flag}: {err}");
    }
}

/// Issue 12 item 9: `docket worker --config workers.toml` runs the enabled named workers, each
/// reports its state (`docket worker list`), a worker killed with SIGKILL is restarted (its
/// report counts the restart), SIGTERM stops them all within shutdown_interval and they report
/// `stop`; a worker that dies without a word is `lost` after three missed reports.
fn worker_supervisor_from_the_cli(backend: &str) {
    let s = serve(backend);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("workers.toml");
    std::fs::write(
        &cfg,
        r#"
shutdown_interval = "5s"
report_interval = "200ms"

[workers.mailer]
queue = "mail"
concurrency = 2
command = ["sh", "-c", "cat > /dev/null; echo sent"]

[workers.resizer]
queue = "img"
kinds = ["resize"]
command = ["sh", "-c", "cat > /dev/null; echo resized"]

[workers.off]
queue = "never"
command = ["true"]
enabled = false
"#,
    )
    .unwrap();
    let mut sup = Worker(
        Command::new(BIN)
            .args(["worker", "--config", cfg.to_str().unwrap()])
            .env("DOCKET_SERVER", &s.url)
            .env("DOCKET_LOG", "warn")
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap(),
    );
    let workers = || -> Vec<Value> {
        serde_json::from_str::<Value>(&s.ok(&["worker", "list", "--json"]))
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    let wait = |what: &str, f: &dyn Fn(&[Value]) -> bool| -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let w = workers();
            if f(&w) {
                return w;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {w:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let w = wait("two idle workers", &|w| {
        w.len() == 2 && w.iter().all(|x| x["state"] == "idle")
    });
    assert_eq!(
        w.iter()
            .map(|x| x["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        vec!["mailer", "resizer"],
        "the disabled worker is not started"
    );
    assert_eq!(w[0]["report"]["queue"], "mail");
    assert_eq!(w[0]["report"]["concurrency"], 2);
    assert_eq!(w[1]["report"]["kinds"], json!(["resize"]));
    let a = s.add(&["--kind", "k", "--queue", "mail"]);
    let b = s.add(&["--kind", "resize", "--queue", "img"]);
    assert_eq!(
        s.wait_for(a, "done", |t| t["state"] == "completed")["result"],
        "sent\n"
    );
    assert_eq!(
        s.wait_for(b, "done", |t| t["state"] == "completed")["worker"],
        "resizer"
    );
    // A crash: the mailer's process is killed; the supervisor starts it again.
    let pid = w[0]["report"]["pid"].as_u64().unwrap() as u32;
    signal(pid, Signal::SIGKILL);
    let w = wait("the mailer restarted", &|w| {
        w[0]["report"]["restarts"] == 1 && w[0]["state"] == "idle"
    });
    assert_ne!(w[0]["report"]["pid"].as_u64(), Some(u64::from(pid)));
    let c = s.add(&["--kind", "k", "--queue", "mail"]);
    s.wait_for(c, "done after the restart", |t| t["state"] == "completed");
    // The table view.
    let table = s.ok(&["worker", "list"]);
    assert!(
        table.contains("mailer") && table.contains("idle"),
        "{table}"
    );
    // SIGHUP re-reads the file (issue 21 item 11): the resizer is removed (it stops and says
    // so), the mailer changes (a new process with the new concurrency), a packer is added, and
    // a worker that did not change keeps its process. A file that does not load changes nothing.
    let pid_of = |w: &[Value], name: &str| {
        w.iter()
            .find(|x| x["name"] == name)
            .and_then(|x| x["report"]["pid"].as_u64())
    };
    let before = workers();
    let mailer_pid = pid_of(&before, "mailer");
    std::fs::write(
        &cfg,
        r#"
shutdown_interval = "5s"
report_interval = "200ms"

[workers.mailer]
queue = "mail"
concurrency = 3
command = ["sh", "-c", "cat > /dev/null; echo sent"]

[workers.packer]
queue = "pack"
command = ["sh", "-c", "cat > /dev/null; echo packed"]
"#,
    )
    .unwrap();
    signal(sup.id(), Signal::SIGHUP);
    let w = wait("the reload", &|w| {
        let by = |n: &str| {
            w.iter()
                .find(|x| x["name"] == n)
                .cloned()
                .unwrap_or(Value::Null)
        };
        by("resizer")["state"] == "stop"
            && by("packer")["state"] == "idle"
            && by("mailer")["report"]["concurrency"] == 3
            && by("mailer")["state"] == "idle"
    });
    assert_ne!(
        pid_of(&w, "mailer"),
        mailer_pid,
        "the changed worker is a new process"
    );
    let p = s.add(&["--kind", "k", "--queue", "pack"]);
    assert_eq!(
        s.wait_for(p, "packed", |t| t["state"] == "completed")["result"],
        "packed
"
    );
    // Unchanged this time: the packer keeps its process; a broken file keeps everything.
    let packer_pid = pid_of(&w, "packer");
    signal(sup.id(), Signal::SIGHUP);
    std::thread::sleep(Duration::from_millis(800));
    std::fs::write(&cfg, "[workers.x]\nqueue = \"\"\n").unwrap();
    signal(sup.id(), Signal::SIGHUP);
    std::thread::sleep(Duration::from_millis(800));
    let w = workers();
    assert_eq!(pid_of(&w, "packer"), packer_pid, "not touched: {w:?}");
    assert!(
        sup.0.try_wait().unwrap().is_none(),
        "a bad file does not stop the supervisor"
    );
    let q = s.add(&["--kind", "k", "--queue", "pack"]);
    s.wait_for(q, "still packing", |t| t["state"] == "completed");
    // SIGTERM stops every worker within shutdown_interval; each says so.
    let t0 = Instant::now();
    signal(sup.id(), Signal::SIGTERM);
    assert!(sup.wait().unwrap().success());
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let w = workers();
    assert!(w.iter().all(|x| x["state"] == "stop"), "{w:?}");
    // A worker that dies without a word goes lost after three missed reports.
    let mut solo = s.worker(
        &[
            "--name",
            "solo",
            "--queue",
            "solo",
            "--report-interval",
            "200ms",
        ],
        &["true"],
    );
    wait("solo reporting", &|w| {
        w.iter()
            .any(|x| x["name"] == "solo" && x["state"] == "idle")
    });
    signal_group(solo.id(), Signal::SIGKILL);
    let _ = solo.wait();
    wait("solo lost", &|w| {
        w.iter()
            .any(|x| x["name"] == "solo" && x["state"] == "lost")
    });
    // A bad file is refused with every problem listed.
    std::fs::write(&cfg, "[workers.x]\nqueue = \"\"\ncommand = []\n").unwrap();
    let o = s.cli(&["worker", "--config", cfg.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("workers.x.queue") && err.contains("workers.x.command"),
        "{err}"
    );
}

/// Issue 24: `docket serve` nodes on one database that cannot notify (SQLite, MySQL) wake each
/// other over UDP: with polling at 60 s, a task added through node b reaches a claim
/// long-polling on node a within a few seconds (generous bound). On PostgreSQL NOTIFY does it.
/// A bad `--peer-wake` is refused with one line.
fn nodes_wake_each_other(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = db_args(backend, &dir);
    let start = |name: &str| {
        let port = free_port();
        let mut c = Command::new(BIN);
        c.arg("serve")
            .args(&db)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--node", name])
            .args(["--poll-interval", "60s"])
            .env("DOCKET_LOG", "warn")
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .process_group(0);
        let w = Worker(c.spawn().unwrap());
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while http::blocking_get(&format!("{url}/healthz")).is_none() {
            assert!(Instant::now() < deadline, "node {name} did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        (w, url)
    };
    let (_a, url_a) = start("a");
    // b registers after a, so b's first heartbeat already knows where a listens.
    let (_b, url_b) = start("b");
    std::thread::sleep(Duration::from_secs(1));
    let claim = std::thread::spawn(move || {
        let t0 = Instant::now();
        let body = r#"{"worker":"w","limit":1,"wait":"20s"}"#;
        let got = http::blocking_post(&format!("{url_a}/v1/queues/far/claim"), body);
        (t0.elapsed(), got)
    });
    std::thread::sleep(Duration::from_millis(500));
    let add = Command::new(BIN)
        .args(["task", "add", "--queue", "far", "--kind", "k", "--json"])
        .env("DOCKET_SERVER", &url_b)
        .output()
        .unwrap();
    assert!(
        add.status.success(),
        "{}",
        String::from_utf8_lossy(&add.stderr)
    );
    let id = serde_json::from_slice::<Value>(&add.stdout).unwrap()["id"].clone();
    let (took, got) = claim.join().unwrap();
    let got = got.expect("the claim answered 200");
    assert_eq!(got["tasks"][0]["id"], id, "{got}");
    assert!(took < Duration::from_secs(8), "picked up after {took:?}");

    let o = Command::new(BIN)
        .arg("serve")
        .args(&db)
        .args(["--peer-wake", "nope"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("peer_wake \"nope\" must be IP:PORT or off"),
        "{err}"
    );
}

/// Issue 37 item 2: `docket worker` told to stop (SIGTERM) at the moment tasks arrive strands
/// nothing. 30 rounds: a worker (concurrency 4) long-polls, 20 tasks become available at once
/// and the SIGTERM comes within ±30 ms of that. Each worker exits within its grace; at the end
/// no task is running and none lost an attempt to a stop.
fn worker_stop_as_tasks_arrive_strands_nothing(backend: &str) {
    let s = serve(backend);
    let q = "stopping";
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut jitter = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % 61) as i64 - 30
    };
    let add = format!("{}/v1/tasks", s.url);
    let body = json!({"tasks": (0..20).map(|i| json!({"queue": q, "kind": "k", "payload": i})).collect::<Vec<_>>()}).to_string();
    for round in 0..30 {
        let mut w = s.worker(
            &[
                "--queue",
                q,
                "--concurrency",
                "4",
                "--grace",
                "5s",
                "--report-interval",
                "0s",
            ],
            &["true"],
        );
        // Its claim is long-polling by now.
        std::thread::sleep(Duration::from_millis(500));
        let off = jitter();
        if off < 0 {
            signal(w.id(), Signal::SIGTERM);
            std::thread::sleep(Duration::from_millis(off.unsigned_abs()));
            assert!(http::blocking_post(&add, &body).is_some());
        } else {
            assert!(http::blocking_post(&add, &body).is_some());
            std::thread::sleep(Duration::from_millis(off as u64));
            signal(w.id(), Signal::SIGTERM);
        }
        let t0 = Instant::now();
        loop {
            if let Some(st) = w.0.try_wait().unwrap() {
                assert!(st.success(), "round {round}: {st:?}");
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "round {round}: the worker did not stop within its 5 s grace"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let page = http::blocking_get(&format!("{}/v1/tasks?queue={q}&limit=1000", s.url)).unwrap();
    let tasks = page["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 600);
    let stranded: Vec<&Value> = tasks
        .iter()
        .filter(|t| !matches!(t["state"].as_str(), Some("available" | "completed")))
        .collect();
    assert!(stranded.is_empty(), "left behind by a stop: {stranded:?}");
    for t in tasks {
        let want = if t["state"] == "completed" { 1 } else { 0 };
        assert_eq!(t["attempt"], want, "an attempt lost to a stop: {t}");
        assert_eq!(t["errors"], json!([]), "{t}");
    }
}

/// A command still running when `docket worker`'s grace ends is killed and its task handed back
/// at once (failed with retry_in 0), not left under its lease until the rescuer.
fn worker_hands_back_what_outlives_the_grace(backend: &str) {
    let s = serve(backend);
    let id = s.add(&["--kind", "slow", "--queue", "graceq"]);
    let mut w = s.worker(
        &[
            "--queue",
            "graceq",
            "--grace",
            "1s",
            "--kill-grace",
            "1s",
            "--lease",
            "1h",
        ],
        &["sleep", "60"],
    );
    s.wait_for(id, "running", |t| t["state"] == "running");
    signal(w.id(), Signal::SIGTERM);
    let t0 = Instant::now();
    assert!(w.wait().unwrap().success());
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let t = s.task(id);
    assert!(
        matches!(t["state"].as_str(), Some("available" | "retryable")),
        "{t}"
    );
    assert_eq!(
        t["errors"][0]["message"],
        "worker stopped: killed after the grace period"
    );
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod pg { $( #[test] fn $name() { super::$name("pg") } )* }
        mod sqlite { $( #[test] fn $name() { super::$name("sqlite") } )* }
        mod mysql { $( #[test] fn $name() { super::$name("mysql") } )* }
    };
}

both!(
    worker_stop_as_tasks_arrive_strands_nothing,
    worker_hands_back_what_outlives_the_grace,
    fair_queues_from_the_cli,
    rate_limits_from_the_cli,
    batches_from_the_cli,
    workflows_from_the_cli,
    compat_asyncflow_from_the_cli,
    worker_supervisor_from_the_cli,
    schedule_cfg_from_the_cli,
    task_set_and_stages_from_the_cli,
    linear_backoff_from_the_cli,
    node_drain_from_the_cli,
    user_task_lists_from_the_cli,
    task_search_from_the_cli,
    worker_claims_only_its_kinds,
    odd_queue_names_reach_their_own_routes,
    worker_enforces_the_timeout,
    worker_retries_reports_across_a_server_restart,
    worker_runs_commands,
    killed_worker_loses_nothing,
    serve_shuts_down_gracefully,
    bulk_file_and_cli_errors,
    tokens_from_the_cli,
    nodes_started_together_agree_on_the_schema,
    nodes_wake_each_other,
    expiry_and_after_end_from_the_cli,
    worker_control_protocol,
);

/// Auth required: `docket token create/list/revoke` on the database, DOCKET_TOKEN for the CLI and
/// the worker, one clear line (and a non-zero exit) when refused.
fn tokens_from_the_cli(backend: &str) {
    let s = serve_with(backend, &["--auth", "required"]);
    let as_token = |token: Option<&str>, args: &[&str]| {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("DOCKET_SERVER", &s.url)
            .env_remove("DOCKET_TOKEN");
        if let Some(t) = token {
            c.env("DOCKET_TOKEN", t);
        }
        c.output().unwrap()
    };
    let token_cmd = |args: &[&str]| {
        let mut a = vec!["token"];
        a.extend_from_slice(args);
        let db: Vec<&str> = s.db.iter().map(String::as_str).collect();
        a.extend_from_slice(&db);
        Command::new(BIN).args(&a).output().unwrap()
    };
    let made = token_cmd(&["create", "ci", "--scope", "enqueue", "--scope", "read"]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let ci = String::from_utf8(made.stdout).unwrap().trim().to_string();
    assert!(ci.starts_with("dkt_") && ci.len() == 68, "{ci}");
    let again = token_cmd(&["create", "ci", "--scope", "read"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already has that name"));
    let bad = token_cmd(&["create", "x", "--scope", "root"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown scope"));

    // Without a token: one line naming the problem, exit 1.
    let o = as_token(None, &["task", "add", "--kind", "k"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("unauthenticated") && err.contains("401"),
        "{err}"
    );
    // With one.
    let o = as_token(Some(&ci), &["task", "add", "--kind", "k", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let id = serde_json::from_slice::<Value>(&o.stdout).unwrap()["id"]
        .as_i64()
        .unwrap();
    // A worker whose token may not work the queue stops at once with the server's reason.
    let w = token_cmd(&["create", "w", "--scope", "work", "--queue", "other"]);
    let w = String::from_utf8(w.stdout).unwrap().trim().to_string();
    let o = Command::new(BIN)
        .args(["worker", "--queue", "default", "--", "true"])
        .env("DOCKET_SERVER", &s.url)
        .env("DOCKET_TOKEN", &w)
        .env("DOCKET_LOG", "warn")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.contains("forbidden") && err.contains("default"),
        "{err}"
    );
    // One that may works it.
    let w2 = token_cmd(&["create", "w2", "--scope", "work", "--queue", "default"]);
    let w2 = String::from_utf8(w2.stdout).unwrap().trim().to_string();
    let mut c = Command::new(BIN);
    c.args(["worker", "--queue", "default", "--", "true"])
        .env("DOCKET_SERVER", &s.url)
        .env("DOCKET_TOKEN", &w2)
        .env("DOCKET_LOG", "warn")
        .stdout(Stdio::null())
        .process_group(0);
    let _worker = Worker(c.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = as_token(Some(&ci), &["task", "show", &id.to_string()]);
        let t: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        if t["state"] == "completed" {
            break;
        }
        assert!(Instant::now() < deadline, "not completed: {t}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The list names the tokens, never their secrets.
    let list = token_cmd(&["list"]);
    let text = String::from_utf8(list.stdout).unwrap();
    assert!(
        text.contains("ci") && text.contains("w2") && text.contains("admin"),
        "{text}"
    );
    assert!(!text.contains(&ci) && !text.contains(&w2), "{text}");
    // Revoked: refused at once.
    assert!(token_cmd(&["revoke", "ci"]).status.success());
    let o = as_token(Some(&ci), &["task", "list"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("revoked"));
    assert!(!token_cmd(&["revoke", "ci"]).status.success());

    // With a server given, token commands go through /v1/tokens (issue 21 item 3: they used to
    // create ./docket.db and print a token the server refused). Run from an empty directory,
    // with no database named anywhere: nothing may appear there.
    let cwd = tempfile::tempdir().unwrap();
    let root = token_cmd(&["create", "root", "--scope", "admin"]);
    let root = String::from_utf8(root.stdout).unwrap().trim().to_string();
    let via = |token: Option<&str>, args: &[&str]| {
        let mut c = Command::new(BIN);
        c.arg("token")
            .args(args)
            .current_dir(cwd.path())
            .env("DOCKET_SERVER", &s.url)
            .env_remove("DOCKET_TOKEN")
            .env_remove("DOCKET_DATABASE_URL");
        if let Some(t) = token {
            c.env("DOCKET_TOKEN", t);
        }
        c.output().unwrap()
    };
    let o = via(Some(&root), &["create", "remote", "--scope", "read"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let remote = String::from_utf8(o.stdout).unwrap().trim().to_string();
    let o = as_token(Some(&remote), &["task", "list"]);
    assert!(
        o.status.success(),
        "the server takes the token it made: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = via(Some(&root), &["list"]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(o.status.success() && text.contains("remote"), "{text}");
    assert!(!text.contains(&remote), "{text}");
    // A token without admin: the server's refusal, one line, exit 1.
    let o = via(Some(&remote), &["create", "x", "--scope", "read"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("forbidden"));
    let o = via(Some(&root), &["revoke", "remote"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        as_token(Some(&remote), &["task", "list"]).status.code(),
        Some(1)
    );
    let o = via(Some(&root), &["revoke", "remote"]);
    assert_eq!(o.status.code(), Some(1));
    // Neither a server nor a database: refused in one line; migrate needs a database too.
    for args in [&["token", "list"][..], &["migrate"][..]] {
        let o = Command::new(BIN)
            .args(args)
            .current_dir(cwd.path())
            .env_remove("DOCKET_SERVER")
            .env_remove("DOCKET_DATABASE_URL")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // A SQLite file that is not there is not created by a token command.
    let o = Command::new(BIN)
        .args(["token", "list", "--database", "sqlite://nothere.db"])
        .current_dir(cwd.path())
        .env_remove("DOCKET_SERVER")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no database"));
    let left: Vec<_> = std::fs::read_dir(cwd.path()).unwrap().collect();
    assert!(left.is_empty(), "no file made: {left:?}");
}

/// A non-loopback listen with auth off is refused unless forced by a flag that says the risk.
#[test]
fn serving_the_network_without_auth_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .args(["serve", "--auth", "off", "--listen"])
        .arg(format!("0.0.0.0:{}", free_port()))
        .arg("--database")
        .arg(format!("sqlite://{}", dir.path().join("d.db").display()))
        .env("DOCKET_LOG", "warn")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--allow-unauthenticated-network-access"),
        "{err}"
    );
}

fn processes_from_the_cli(backend: &str) {
    let s = serve(backend);
    let (p, port) = spawn_processor();
    let _p = Killed(p);
    s.ok(&[
        "namespace",
        "put",
        "orders",
        "--processor-url",
        &format!("http://127.0.0.1:{port}/"),
    ]);
    let out = s.ok(&[
        "process",
        "init",
        "orders",
        "o-1",
        "--args",
        r#"{"events": ["created"], "response": "ok"}"#,
    ]);
    assert_eq!(out.trim(), r#""ok""#);
    let o = s.cli(&[
        "process",
        "call",
        "orders",
        "o-1",
        "--args",
        r#"{"error": "card declined"}"#,
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("processor_error") && err.contains("card declined"),
        "{err}"
    );
    let v: Value = serde_json::from_str(&s.ok(&["process", "get", "orders", "o-1"])).unwrap();
    assert_eq!(v["process"]["status"], "error");
    assert_eq!(v["history"][0]["payload"], "created");
    let v: Value = serde_json::from_str(&s.ok(&["process", "trace", "orders", "o-1"])).unwrap();
    assert_eq!(v["tasks"].as_array().unwrap().len(), 2);
    let v: Value =
        serde_json::from_str(&s.ok(&["process", "list", "orders", "--status", "error"])).unwrap();
    assert_eq!(v["processes"][0]["id"], "o-1");
    let v: Value =
        serde_json::from_str(&s.ok(&["process", "simple-repair", "orders", "o-1"])).unwrap();
    assert_eq!(v["process"]["status"], "running");
}

/// A child process killed when dropped (also when a test fails).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

mod processes {
    #[test]
    fn pg() {
        super::processes_from_the_cli("pg")
    }
    #[test]
    fn sqlite() {
        super::processes_from_the_cli("sqlite")
    }
    #[test]
    fn mysql() {
        super::processes_from_the_cli("mysql")
    }
}

/// `docket serve --config`: settings and namespaces from the file; flags override it; a bad file
/// stops the server with a message naming it.
#[test]
fn serve_reads_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let (p, proc_port) = spawn_processor();
    let _p = Killed(p);
    let port = free_port();
    let cfg = dir.path().join("docket.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:{port}\"\ndatabase = \"sqlite://{}\"\nnode = \"from-file\"\n\n\
             [namespaces.orders]\nprocessor = {{ url = \"http://127.0.0.1:{proc_port}/\" }}\n\
             process_step_timeout = \"20s\"\n",
            dir.path().join("c.db").display()
        ),
    )
    .unwrap();
    let child = Command::new(BIN)
        .args([
            "serve",
            "--config",
            cfg.to_str().unwrap(),
            "--node",
            "flag-node",
        ])
        .env("DOCKET_LOG", "warn")
        .spawn()
        .unwrap();
    let _server = Killed(child);
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let health = loop {
        if let Some(v) = http::blocking_get(&format!("{url}/healthz")) {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "server did not start from the config file"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(health["node"], "flag-node", "the flag overrides the file");
    let ns = http::blocking_get(&format!("{url}/v1/namespaces")).unwrap();
    assert_eq!(ns["namespaces"][0]["name"], "orders");
    assert_eq!(ns["namespaces"][0]["config"]["process_step_timeout"], "20s");
    assert!(dir.path().join("c.db").exists(), "the file's database");
    let out = Command::new(BIN)
        .args([
            "process",
            "init",
            "orders",
            "o1",
            "--args",
            r#"{"response": "from config"}"#,
        ])
        .env("DOCKET_SERVER", &url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#""from config""#
    );
    // A bad file: clear error, non-zero exit.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "listen = \"127.0.0.1:1\"\ncolour = \"red\"\n").unwrap();
    let o = Command::new(BIN)
        .args(["serve", "--config", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.toml is not a valid docket config") && err.contains("colour"),
        "{err}"
    );
    // Settings that parse but do not hold together: every problem is named at once, before
    // anything starts (nothing listens, no database is created).
    let wrong = dir.path().join("wrong.toml");
    std::fs::write(
        &wrong,
        format!(
            "listen = \"nowhere\"\ndatabase = \"sqlite://{}\"\nschema = \"s\"\n\
             grace = \"0s\"\ntls_cert = \"/no/such.pem\"\nrate_burst = 0\n\
             cors_origins = [\"ftp://x\"]\n",
            dir.path().join("never.db").display()
        ),
    )
    .unwrap();
    let o = Command::new(BIN)
        .args(["serve", "--config", wrong.to_str().unwrap()])
        .args(["--sql-target", "no-equals-sign"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    for want in [
        "invalid configuration",
        "listen \"nowhere\" must be HOST:PORT",
        "schema is PostgreSQL's",
        "grace must be longer than 0",
        "tls_cert is set without tls_key",
        "rate_burst must be at least 1",
        "cors origin",
        "--sql-target must be NAME=URL",
    ] {
        assert!(err.contains(want), "{want:?} in {err}");
    }
    assert!(!dir.path().join("never.db").exists(), "nothing was opened");
    // A flag overrides the file's value and fixes it.
    let o = Command::new(BIN)
        .args([
            "serve",
            "--config",
            wrong.to_str().unwrap(),
            "--grace",
            "5s",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("grace must be"), "{err}");
}

fn psql(sql: &str) -> String {
    let o = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-XAtq",
            "-c",
            sql,
        ])
        .output()
        .expect("psql (scripts/test.sh installs PostgreSQL)");
    assert!(
        o.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap().trim_end().to_string()
}

/// SQL tasks and pg_task tables are PostgreSQL features that a docket on SQLite or on
/// MySQL/MariaDB serves too: its own tasks stay in its database, the SQL runs on PostgreSQL.
#[test]
fn sql_tasks_and_a_pg_task_table_on_an_sqlite_docket() {
    sql_tasks_and_a_pg_task_table("sqlite");
}

#[test]
fn sql_tasks_and_a_pg_task_table_on_a_mysql_docket() {
    sql_tasks_and_a_pg_task_table("mysql");
}

fn sql_tasks_and_a_pg_task_table(backend: &str) {
    let schema = format!("cli_pgt_{}", uuid::Uuid::new_v4().simple());
    let pg_task = format!("postgres://postgres@127.0.0.1:5432/postgres?schema={schema}&sleep=100");
    let s = serve_with(
        backend,
        &[
            "--sql-target",
            "main=host=127.0.0.1 user=postgres dbname=postgres",
            "--pg-task",
            &pg_task,
        ],
    );
    // A sql task through docket's own API.
    let id = s.add(&["--sql", "SELECT 1 AS a, 2 AS b", "--target", "main"]);
    let t = s.wait_for(id, "sql task done", |t| t["state"] == "completed");
    assert_eq!(t["queue"], "sql");
    assert_eq!(t["result"], "a\tb\n1\t2");
    let id = s.add(&["--sql", "SELECT 1/0", "--target", "main"]);
    let t = s.wait_for(id, "sql task failed", |t| t["state"] == "discarded");
    assert_eq!(t["attempt"], 1, "an SQL error is not retried");
    assert!(
        t.to_string()
            .contains("ERROR:  division by zero\\nSTATEMENT:  SELECT 1/0"),
        "{t}"
    );
    // The task's timeout is the statement timeout.
    let id = s.add(&[
        "--sql",
        "SELECT pg_sleep(5)",
        "--target",
        "main",
        "--timeout",
        "1s",
    ]);
    let t = s.wait_for(id, "sql task timed out", |t| t["state"] == "discarded");
    assert!(
        t.to_string()
            .contains("ERROR:  canceling statement due to statement timeout"),
        "{t}"
    );
    // Targets are opt-in: a raw connection string and an unknown name are refused.
    for target in ["postgres://postgres@127.0.0.1/postgres", "elsewhere"] {
        let o = s.cli(&["task", "add", "--sql", "SELECT 1", "--target", target]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("sql_target_not_allowed"), "{err}");
    }
    // The pg_task table docket made in PostgreSQL runs a plain INSERT.
    psql(&format!(
        "INSERT INTO {schema}.task (input, \"group\") VALUES ('SELECT 40 + 2 AS answer', 'cli')"
    ));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let row = psql(&format!("SELECT state || '|' || COALESCE(output, '') FROM {schema}.task WHERE \"group\" = 'cli'"));
        if row == "DONE|42" {
            break;
        }
        assert!(Instant::now() < deadline, "pg_task row: {row}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The dashboard shows the table: a panel docket-sql adds (the server knows no pg_task).
    let page = Command::new("curl")
        .args(["-fsS", &format!("{}/ui/schedules", s.url)])
        .output()
        .unwrap();
    let html = String::from_utf8_lossy(&page.stdout);
    assert!(html.contains("<h1>pg_task tables</h1>"), "{html}");
    assert!(html.contains(&format!("{schema}.task")), "{html}");
    assert!(html.contains("SELECT 40 + 2 AS answer"), "{html}");
    drop(s);
    psql(&format!("DROP SCHEMA {schema} CASCADE"));
}

#[test]
fn schedules_from_the_cli() {
    let s = serve("sqlite");
    let count = |s: &Server| -> usize {
        let v: Value =
            serde_json::from_str(&s.ok(&["task", "list", "--kind", "tick", "--json"])).unwrap();
        v.as_array().map_or(0, |a| a.len())
    };
    s.ok(&[
        "schedule",
        "add",
        "ticker",
        "--every",
        "1s",
        "--kind",
        "tick",
        "--payload",
        "{\"n\":1}",
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(&s) < 2 {
        assert!(Instant::now() < deadline, "the schedule did not fire twice");
        std::thread::sleep(Duration::from_millis(100));
    }
    let list = s.ok(&["schedule", "list"]);
    assert!(
        list.contains("ticker") && list.contains("every 1s"),
        "{list}"
    );
    s.ok(&["schedule", "pause", "ticker"]);
    let paused_at = count(&s);
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(count(&s), paused_at, "a paused schedule fires nothing");
    let v: Value = serde_json::from_str(&s.ok(&["schedule", "show", "ticker", "--json"])).unwrap();
    assert_eq!(v["paused"], true);
    assert_eq!(v["task"]["kind"], "tick");
    // Bad input: a clear error and a non-zero exit.
    let o = s.cli(&[
        "schedule",
        "add",
        "bad",
        "--cron",
        "61 * * * *",
        "--kind",
        "tick",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid_schedule"));
    let o = s.cli(&[
        "schedule",
        "add",
        "both",
        "--cron",
        "* * * * *",
        "--every",
        "1s",
        "--kind",
        "k",
    ]);
    assert!(!o.status.success());
    s.ok(&["schedule", "remove", "ticker"]);
    let o = s.cli(&["schedule", "show", "ticker"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not_found"));
}

#[test]
fn operator_cli_status_watch_bulk_completions_man() {
    let s = serve("sqlite");
    for i in 0..4 {
        s.add(&[
            "--kind",
            "bulk",
            "--queue",
            "ops",
            "--payload",
            &format!("{{\"n\":{i}}}"),
        ]);
    }
    let keep = s.add(&["--kind", "keep", "--queue", "ops"]);
    let status = s.ok(&["status"]);
    assert!(
        status.contains("QUEUE") && status.contains("ops") && status.contains("NODE"),
        "{status}"
    );
    assert!(status.contains("cli-test"), "{status}");
    let v: Value = serde_json::from_str(&s.ok(&["status", "--json"])).unwrap();
    assert_eq!(v["queues"][0]["counts"]["available"], 5);
    // Bulk cancel by filter: only the matching tasks, a summary at the end.
    let out = s.ok(&["task", "cancel", "--queue", "ops", "--kind", "bulk"]);
    assert!(out.contains("cancel: 4 done, 0 refused"), "{out}");
    assert_eq!(s.task(keep)["state"], "available");
    let out = s.ok(&["task", "retry", "--kind", "bulk", "--state", "cancelled"]);
    assert!(out.contains("retry: 4 done"), "{out}");
    // `task bulk`: counted, refused without a confirmation when there is no terminal to ask
    // on, done on the server with --yes; delete takes only finished tasks.
    let v: Value = serde_json::from_str(&s.ok(&[
        "task",
        "bulk",
        "cancel",
        "--queue",
        "ops",
        "--kind",
        "bulk",
        "--dry-run",
        "--json",
    ]))
    .unwrap();
    assert_eq!(
        (v["total"].as_i64(), v["more"].as_bool()),
        (Some(4), Some(false))
    );
    let o = s.cli(&["task", "bulk", "cancel", "--queue", "ops", "--kind", "bulk"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--yes"),
        "{o:?}"
    );
    assert_eq!(
        s.task(keep)["state"],
        "available",
        "nothing done unconfirmed"
    );
    let out = s.ok(&[
        "task", "bulk", "cancel", "--queue", "ops", "--kind", "bulk", "--yes",
    ]);
    assert!(out.contains("cancel: 4 done, 0 refused"), "{out}");
    let out = s.ok(&["task", "bulk", "delete", "--queue", "ops", "--yes"]);
    assert!(out.contains("delete: 4 done"), "{out}");
    assert_eq!(
        s.task(keep)["state"],
        "available",
        "unfinished: not deleted"
    );
    let o = s.cli(&["task", "bulk", "nuke", "--queue", "ops", "--yes"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no bulk action"));
    let o = s.cli(&["task", "bulk", "retry", "--state", "running", "--yes"]);
    assert!(!o.status.success(), "retry applies to no running task");
    let o = s.cli(&["task", "cancel", "1", "--queue", "ops"]);
    assert!(
        !o.status.success(),
        "an id and a filter together are refused"
    );
    // watch follows a task to its end: exit 0 when it completes, 1 when cancelled.
    let watcher = Command::new(BIN)
        .args(["task", "watch", &keep.to_string()])
        .env("DOCKET_SERVER", &s.url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let w = s.worker(
        &["--queue", "ops"],
        &["sh", "-c", "cat >/dev/null; echo '{\"ok\":true}'"],
    );
    let out = watcher.wait_with_output().unwrap();
    drop(w);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("available") && text.contains("completed"),
        "{text}"
    );
    assert!(text.contains("result: {\"ok\":true}"), "{text}");
    let gone = s.add(&["--kind", "never", "--queue", "nobody", "--run-in", "1h"]);
    let watcher = Command::new(BIN)
        .args(["task", "watch", &gone.to_string()])
        .env("DOCKET_SERVER", &s.url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    s.ok(&["task", "cancel", &gone.to_string()]);
    let out = watcher.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("cancelled"));
    // Completions and the man page come from the clap definitions.
    let bash = s.ok(&["completions", "bash"]);
    assert!(
        bash.contains("_docket()") && bash.contains("schedule"),
        "bash completions"
    );
    assert!(s.ok(&["completions", "zsh"]).contains("#compdef docket"));
    let man = s.ok(&["man"]);
    assert!(
        man.starts_with(".ie") || man.contains(".TH docket"),
        "{}",
        &man[..200.min(man.len())]
    );
    // The audit log has the CLI's actions with who did them.
    let audit = http::blocking_get(&format!("{}/v1/audit", s.url)).unwrap();
    let user = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
    assert!(audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["actor"] == format!("cli:{user}") && e["action"] == "task.cancel"));
}

/// A minimal OTLP/HTTP collector: keeps every request body it gets.
fn fake_collector() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut r = BufReader::new(c.try_clone().unwrap());
            let mut len = 0usize;
            let mut line = String::new();
            let mut first = String::new();
            loop {
                line.clear();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if first.is_empty() {
                    first = line.clone();
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            let _ = r.read_exact(&mut body);
            keep.lock()
                .unwrap()
                .push(format!("{first}{}", String::from_utf8_lossy(&body)));
            let _ = c.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            );
        }
    });
    (port, got)
}

#[test]
fn worker_exports_task_spans_over_otlp() {
    let s = serve("sqlite");
    let (port, got) = fake_collector();
    let id = s.add(&["--kind", "traced", "--queue", "otel"]);
    let trace = s.task(id)["trace_id"].as_str().unwrap().to_string();
    let mut w = s.worker(
        &[
            "--queue",
            "otel",
            "--otlp-endpoint",
            &format!("http://127.0.0.1:{port}"),
        ],
        &["sh", "-c", "cat >/dev/null; echo 1"],
    );
    s.wait_for(id, "completed", |t| t["state"] == "completed");
    signal(w.id(), Signal::SIGTERM);
    assert!(w.wait().unwrap().success());
    let bodies = got.lock().unwrap().clone();
    let all = bodies.join("\n");
    assert!(all.starts_with("POST /v1/traces"), "{all}");
    assert!(
        all.contains("\"name\": \"task\""),
        "a span named task: {all}"
    );
    assert!(
        all.contains(&format!("\"traceId\": \"{trace}\"")),
        "the task span belongs to the task's trace: {all}"
    );
    assert!(all.contains("docket"), "service name");
}

#[test]
fn bulk_file_enqueue_stops_cleanly_on_ctrl_c() {
    let s = serve("sqlite");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("many.jsonl");
    let lines: Vec<String> = (0..30_000)
        .map(|i| format!("{{\"kind\": \"bulk\", \"queue\": \"ctrlc\", \"payload\": {i}}}"))
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let child = Command::new(BIN)
        .args([
            "task",
            "add",
            "--file",
            file.to_str().unwrap(),
            "--batch",
            "2",
        ])
        .env("DOCKET_SERVER", &s.url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    signal(child.id(), Signal::SIGINT);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(130), "{text}");
    let sent: usize = text
        .split("the first ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        sent > 0 && sent < 30_000 && sent.is_multiple_of(2),
        "{text}"
    );
    // Exactly what it said was sent is in the queue: whole batches, nothing half-written.
    let q = http::blocking_get(&format!("{}/v1/queues/ctrlc", s.url)).unwrap();
    assert_eq!(q["counts"]["available"].as_u64(), Some(sent as u64), "{q}");
}

/// No database password reaches the logs, `/v1/status`, `/metrics`, the dashboard, task errors
/// or API error messages (docs: operations/security.md). PostgreSQL here trusts 127.0.0.1, so URLs with a
/// password connect and the password is just text to look for.
#[test]
fn no_password_in_any_output() {
    let dir = tempfile::tempdir().unwrap();
    let schema = format!("cli_sec_{}", uuid::Uuid::new_v4().simple());
    let pgt_schema = format!("cli_secpgt_{}", uuid::Uuid::new_v4().simple());
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let log = dir.path().join("serve.log");
    let child = Command::new(BIN)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--node", "sec"])
        .args([
            "--database",
            "postgres://postgres:SeCrEt-db-1@127.0.0.1:5432/postgres",
            "--schema",
            &schema,
        ])
        .args([
            "--sql-target",
            "main=postgres://postgres:SeCrEt-tg-2@127.0.0.1:5432/postgres",
            "--sql-target",
            "dead=host=127.0.0.1 port=1 user=postgres password=SeCrEt-dd-3 dbname=postgres",
            "--pg-task",
            &format!("postgres://postgres:SeCrEt-pt-4@127.0.0.1:5432/postgres?schema={pgt_schema}&sleep=100"),
        ])
        .env("DOCKET_LOG", "debug")
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::options().append(true).open(&log).unwrap())
        .spawn()
        .unwrap();
    let mut s = Server {
        child,
        url: url.clone(),
        db: vec![],
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while http::blocking_get(&format!("{url}/healthz")).is_none() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A task that fails to connect, one that runs, and refused ones that name a URL.
    let dead = s.add(&[
        "--sql",
        "SELECT 1",
        "--target",
        "dead",
        "--max-attempts",
        "1",
    ]);
    let ok = s.add(&["--sql", "SELECT 1", "--target", "main"]);
    s.wait_for(dead, "dead target failed", |t| t["state"] == "discarded");
    s.wait_for(ok, "sql task done", |t| t["state"] == "completed");
    let mut seen = String::new();
    for target in [
        "postgres://postgres:SeCrEt-raw-5@127.0.0.1/postgres",
        "host=x password=SeCrEt-raw-6",
    ] {
        let o = s.cli(&["task", "add", "--sql", "SELECT 1", "--target", target]);
        assert!(!o.status.success());
        seen.push_str(&String::from_utf8_lossy(&o.stderr));
    }
    for path in [
        "/v1/status".to_string(),
        "/metrics".to_string(),
        "/".to_string(),
        "/ui/schedules".to_string(),
        "/ui/tasks".to_string(),
        format!("/ui/tasks/{dead}"),
        format!("/v1/tasks/{dead}"),
        "/v1/nodes".to_string(),
        "/healthz".to_string(),
    ] {
        let o = Command::new("curl")
            .args(["-s", &format!("{url}{path}")])
            .output()
            .unwrap();
        assert!(!o.stdout.is_empty(), "{path} answered nothing");
        seen.push_str(&format!("\n--- {path}\n"));
        seen.push_str(&String::from_utf8_lossy(&o.stdout));
    }
    let _ = s.child.kill();
    let _ = s.child.wait();
    seen.push_str(&std::fs::read_to_string(&log).unwrap());
    assert!(seen.contains("docket serving"), "the log was captured");
    assert!(
        seen.contains("/ui/tasks") || seen.contains("task"),
        "pages were read"
    );
    if let Some(i) = seen.find("SeCrEt") {
        let from = seen[..i]
            .char_indices()
            .rev()
            .nth(300)
            .map_or(0, |(j, _)| j);
        panic!(
            "a password leaked: …{}…",
            &seen[from..(i + 40).min(seen.len())]
        );
    }
}

/// `docket serve --tls-cert --tls-key`: the CLI reaches it over https:// with --ca-file, not
/// without; SIGHUP switches to new files for new connections.
#[test]
fn https_serve_and_sighup_reload() {
    let pki = || {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        (ca.pem(), cert.pem(), key.serialize_pem())
    };
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let (ca1, cert1, key1) = pki();
    std::fs::write(p("ca1.pem"), &ca1).unwrap();
    std::fs::write(p("cert.pem"), &cert1).unwrap();
    std::fs::write(p("key.pem"), &key1).unwrap();
    let port = free_port();
    let child = Command::new(BIN)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--database")
        .arg(format!("sqlite://{}", p("d.db").display()))
        .arg("--tls-cert")
        .arg(p("cert.pem"))
        .arg("--tls-key")
        .arg(p("key.pem"))
        .env("DOCKET_LOG", "warn")
        .spawn()
        .unwrap();
    let url = format!("https://127.0.0.1:{port}");
    // Killed when the test ends, passed or not.
    let mut server = Server {
        child,
        url: url.clone(),
        db: vec![],
        _dir: tempfile::tempdir().unwrap(),
    };
    let cli = |ca: &str| {
        Command::new(BIN)
            .args(["node", "--server", &url, "--ca-file"])
            .arg(p(ca))
            .output()
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cli("ca1.pem").status.success() {
        assert!(Instant::now() < deadline, "https server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = Command::new(BIN)
        .args(["node", "--server", &url])
        .output()
        .unwrap();
    assert!(!o.status.success(), "an unknown CA is refused");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (ca2, cert2, key2) = pki();
    std::fs::write(p("ca2.pem"), &ca2).unwrap();
    std::fs::write(p("cert.pem"), &cert2).unwrap();
    std::fs::write(p("key.pem"), &key2).unwrap();
    signal(server.child.id(), Signal::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cli("ca2.pem").status.success() {
        assert!(
            Instant::now() < deadline,
            "SIGHUP did not reload the certificate"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !cli("ca1.pem").status.success(),
        "the old certificate is gone"
    );
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "SIGHUP did not stop the server"
    );
    signal(server.child.id(), Signal::SIGTERM);
    let _ = server.child.wait();
}

/// Auth required and no token yet: the first start creates an `admin` token and prints it once
/// on stderr, or takes DOCKET_ADMIN_TOKEN; a second start creates none.
#[test]
fn bootstrap_admin_token() {
    let dir = tempfile::tempdir().unwrap();
    let db = |name: &str| format!("sqlite://{}", dir.path().join(name).display());
    let start = |db: String, env_token: Option<&str>| {
        let port = free_port();
        let log = dir.path().join(format!("serve-{port}.log"));
        let mut c = Command::new(BIN);
        c.args([
            "serve",
            "--auth",
            "required",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .args(["--database", &db])
        .env("DOCKET_LOG", "warn")
        .env_remove("DOCKET_ADMIN_TOKEN")
        .stderr(std::fs::File::create(&log).unwrap());
        if let Some(t) = env_token {
            c.env("DOCKET_ADMIN_TOKEN", t);
        }
        let s = Server {
            child: c.spawn().unwrap(),
            url: format!("http://127.0.0.1:{port}"),
            db: vec![],
            _dir: tempfile::tempdir().unwrap(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while http::blocking_get(&format!("{}/healthz", s.url)).is_none() {
            assert!(Instant::now() < deadline, "server did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        (s, log)
    };
    let list = |s: &Server, token: &str| {
        Command::new(BIN)
            .args(["task", "list", "--server", &s.url, "--token", token])
            .output()
            .unwrap()
            .status
            .success()
    };
    // A fixed token from the environment.
    let given = "dkt_given_by_the_operator_0123456789abcdef";
    let (s, log) = start(db("d.db"), Some(given));
    assert!(list(&s, given));
    assert!(
        !std::fs::read_to_string(&log).unwrap().contains(given),
        "never printed"
    );
    drop(s);
    // Tokens exist now: a second start prints none.
    let (s, log) = start(db("d.db"), None);
    assert!(!std::fs::read_to_string(&log).unwrap().contains("dkt_"));
    drop(s);
    // A fresh database: the token is printed once, and works.
    let (s, log) = start(db("fresh.db"), None);
    let text = std::fs::read_to_string(&log).unwrap();
    let printed = text
        .split_whitespace()
        .find(|w| w.starts_with("dkt_"))
        .unwrap_or_else(|| panic!("no token printed: {text}"))
        .to_string();
    assert!(list(&s, &printed));
    assert!(!list(&s, "dkt_wrong"));
}

/// Output into a pipe its reader closed (`docket … | head`) ends quietly, without a panic.
#[test]
fn closed_stdout_pipe_is_quiet() {
    let mut c = Command::new(BIN)
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(c.stdout.take());
    let o = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.is_empty(), "{err}");
}

/// `docket bench --save` writes a baseline; `--compare` prints the ratios and fails on a drop
/// of `--max-drop` times (here a baseline made ten times faster than the run).
#[test]
fn bench_compares_with_a_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.json");
    let run = |extra: &[&str]| {
        Command::new(BIN)
            .args(["bench", "-n", "300", "-c", "2", "--latency-secs", "0"])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&["--save", base.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    assert_eq!(
        (v["backend"].as_str(), v["tasks"].as_u64()),
        (Some("sqlite"), Some(300))
    );
    let o = run(&["--compare", base.to_str().unwrap(), "--max-drop", "1000"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("of baseline"));
    v["worked_per_s"] = json!(v["worked_per_s"].as_f64().unwrap() * 10.0);
    let fast = dir.path().join("fast.json");
    std::fs::write(&fast, v.to_string()).unwrap();
    let o = run(&["--compare", fast.to_str().unwrap(), "--max-drop", "3"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("worked tasks/s is") && err.contains("worse"),
        "{err}"
    );
}

/// Starts `examples/processor.py` on a port of its own choosing (it prints `PORT n` once it
/// listens), so no other test can take the port in between.
fn spawn_processor() -> (std::process::Child, u16) {
    use std::io::BufRead;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/processor.py");
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .arg("0")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().expect("piped"))
        .read_line(&mut line)
        .expect("the processor says its port");
    let port = line
        .trim()
        .strip_prefix("PORT ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("processor said {line:?}"));
    (child, port)
}

/// A plain GET's body whatever it is (for `/metrics`).
fn get_text(url: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(s, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    buf
}

/// `[[sinks]]` in the config file: a namespace's notifications and a queue's task events go to
/// NATS JetStream — a private `nats-server` of this test's own (`docket_sinks::testing`, as the
/// sinks' tests start), never one the machine may run on 4222, which `scripts/test.sh` does not
/// start and Debian's package runs without JetStream — and a sink whose broker is not there
/// fails nothing: process calls answer, its failures are counted in `/metrics` and shown on the
/// dashboard. A bad `[[sinks]]` entry stops the server before anything starts.
#[test]
fn serve_publishes_to_sinks_from_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let nats = docket_sinks::testing::NatsServer::start();
    let (p, proc_port) = spawn_processor();
    let _p = Killed(p);
    let port = free_port();
    let dead = free_port();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let cfg = dir.path().join("docket.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:{port}\"\ndatabase = \"sqlite://{}\"\n\n\
             [namespaces.orders]\nprocessor = {{ url = \"http://127.0.0.1:{proc_port}/\" }}\n\n\
             [[sinks]]\nname = \"js\"\ntype = \"nats\"\nurl = \"{nats}\"\n\
             namespaces = [\"orders\"]\nqueues = [\"mail\"]\nsubject_prefix = \"cli{id}\"\nstream = \"CLI{id}\"\n\n\
             [[sinks]]\nname = \"gone\"\ntype = \"rabbitmq\"\n\
             url = \"amqp://guest:guest@127.0.0.1:{dead}/%2f\"\nnamespaces = [\"*\"]\n",
            dir.path().join("s.db").display(),
            nats = nats.url(),
        ),
    )
    .unwrap();
    let child = Command::new(BIN)
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .env("DOCKET_LOG", "error")
        .spawn()
        .unwrap();
    let _server = Killed(child);
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while http::blocking_get(&format!("{url}/healthz")).is_none() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    for i in 0..5 {
        let t0 = Instant::now();
        let out = Command::new(BIN)
            .args(["process", "init", "orders", &format!("o{i}")])
            .env("DOCKET_SERVER", &url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "a call waited for a sink"
        );
    }
    // A task of the queue the sink names: its events (enqueued) go out too.
    let out = Command::new(BIN)
        .args(["task", "add", "--queue", "mail", "--kind", "k"])
        .env("DOCKET_SERVER", &url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let metrics = loop {
        let m = get_text(&format!("{url}/metrics"));
        let tasks = m.lines().any(|l| {
            l.starts_with("docket_sink_published_total{")
                && l.contains("queue=\"mail\"")
                && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) >= Some(1.0)
        });
        let published = tasks
            && m.lines().any(|l| {
                l.starts_with("docket_sink_published_total{")
                    && l.contains("sink=\"js\"")
                    && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) >= Some(5.0)
            });
        let failing = m
            .lines()
            .any(|l| l.starts_with("docket_sink_failures_total{") && l.contains("sink=\"gone\""));
        if published && failing {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "sinks never showed up in /metrics:\n{m}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    for m in [
        "docket_sink_backlog{",
        "docket_sink_oldest_seconds{",
        "docket_sink_lag_seconds_count{sink=\"js\"}",
    ] {
        assert!(metrics.contains(m), "no {m} in {metrics}");
    }
    assert!(
        metrics.contains("progressor_notification_duration_ms_count{namespace=\"orders\",notification_type=\"nats\"}"),
        "{metrics}"
    );
    let page = get_text(&format!("{url}/ui/sinks"));
    assert!(
        page.contains("HTTP/1.1 200") || page.contains("HTTP/1.0 200"),
        "{page}"
    );
    for want in [
        "js",
        "gone",
        "nats",
        "rabbitmq",
        "cannot connect to RabbitMQ",
        "tasks of queue",
    ] {
        assert!(page.contains(want), "the sinks page lacks {want}: {page}");
    }
    assert!(
        !page.contains("guest:guest"),
        "a broker password on the page"
    );
    // A bad entry: named, and nothing starts.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[sinks]]\nname = \"k\"\ntype = \"kafka\"\nurl = \"kafka://h\"\nnamespaces = [\"*\"]\n",
    )
    .unwrap();
    let o = Command::new(BIN)
        .args(["serve", "--config", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("sink k: type \"kafka\" is not one of nats, rabbitmq"),
        "{err}"
    );
}
