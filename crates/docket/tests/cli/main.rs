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

/// A port nothing listens on now, and never one this test binary handed out before: the port
/// is closed again before `docket serve` binds it, and the kernel may give the same number to
/// the next test that asks in between (stop 45's CI: one test talked to another's server).
fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut given = GIVEN.lock().unwrap();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
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
    /// `cli-test-<port>`: unique, so a test knows its own server answered.
    node: String,
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
    // A port from free_port() can be taken by another test's server before ours binds it; the
    // node name tells whose server answers, and a child that exited is started on another port.
    'attempt: for _ in 0..5 {
        let port = free_port();
        let node = format!("cli-test-{port}");
        let mut child = Command::new(BIN)
            .arg("serve")
            .args(&db)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--node", &node])
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
        loop {
            if let Some(h) = http::blocking_get(&format!("{url}/healthz")) {
                if h["node"] == node.as_str() {
                    return Server {
                        child,
                        url,
                        node,
                        db,
                        _dir: dir,
                    };
                }
            }
            if child.try_wait().unwrap().is_some() {
                continue 'attempt;
            }
            assert!(Instant::now() < deadline, "server did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    panic!("server did not start on any of five ports");
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

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod pg { $( #[test] fn $name() { super::$name("pg") } )* }
        mod sqlite { $( #[test] fn $name() { super::$name("sqlite") } )* }
        mod mysql { $( #[test] fn $name() { super::$name("mysql") } )* }
    };
}

/// A child process killed when dropped (also when a test fails).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

use docket_store::testing::spawn_example_processor as spawn_processor;

mod compat;
mod flows;
mod operator;
mod serve;
mod tasks;
mod worker;
