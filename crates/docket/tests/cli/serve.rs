//! `docket serve`: stops, a lost database, nodes together, drains, config files, TLS, tokens at start, sinks.

use super::*;

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
        .find(|n| n["name"] == s.node.as_str())
        .unwrap()
        .clone();
    assert_eq!(first["state"], "stopped", "{nodes}");
    let _ = again.kill();
    let _ = again.wait();
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
        node: String::new(),
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
            node: String::new(),
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
        err.contains("sink k: broker \"h\" in url is not host:port"),
        "{err}"
    );
}

both!(
    serve_shuts_down_gracefully,
    nodes_started_together_agree_on_the_schema,
    nodes_wake_each_other,
    node_drain_from_the_cli,
);
