//! Test fixtures (feature `testing`): a private `nats-server` with JetStream and a private
//! Kafka-protocol broker (`tansu`), for this crate's tests and the CLI's. A test never relies on
//! a NATS the machine may run on 4222: Debian's `nats-server` package starts one without
//! JetStream, and a clean machine has none; `scripts/test.sh` installs the binaries, each test
//! starts its own.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free port of 127.0.0.1.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `child` once it takes connections on `port`; killed, with a panic saying `why()`, when it
/// does not within `within`.
fn listening(mut child: Child, port: u16, within: Duration, why: impl Fn() -> String) -> Child {
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if t0.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{}", why());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// A private `nats-server` with JetStream (`-js`) on its own port and store directory, killed
/// when dropped.
pub struct NatsServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl NatsServer {
    /// Started on a free port of 127.0.0.1 with an empty configuration file; returns once it
    /// takes connections.
    ///
    /// # Panics
    /// When `nats-server` is not on the `PATH` or does not listen within 20 s.
    pub fn start() -> NatsServer {
        Self::start_with("")
    }

    /// [`NatsServer::start`] with `conf` as its configuration file (e.g. `max_payload: 2048`).
    ///
    /// # Panics
    /// As [`NatsServer::start`].
    pub fn start_with(conf: &str) -> NatsServer {
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("nats.conf"), conf).unwrap();
        let child = Self::spawn(port, dir.path());
        NatsServer { child, port, dir }
    }

    fn spawn(port: u16, dir: &Path) -> Child {
        let child = Command::new("nats-server")
            .arg("-c")
            .arg(dir.join("nats.conf"))
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server (scripts/test.sh installs it)");
        listening(child, port, Duration::from_secs(20), || {
            format!("nats-server did not start on port {port}")
        })
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Killed (SIGKILL).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Started again on the same port and store, with configuration `conf`.
    ///
    /// # Panics
    /// As [`NatsServer::start`].
    pub fn start_again_with(&mut self, conf: &str) {
        std::fs::write(self.dir.path().join("nats.conf"), conf).unwrap();
        self.start_again();
    }

    /// Started again on the same port and store.
    ///
    /// # Panics
    /// As [`NatsServer::start`].
    pub fn start_again(&mut self) {
        self.child = Self::spawn(self.port, self.dir.path());
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A private Kafka-protocol broker: `tansu` (crates.io, an Apache Kafka-compatible broker)
/// with its SQLite storage (`sqlite://`), so what it took survives a kill and a restart. Found
/// at `DOCKET_TANSU` (`scripts/test.sh` installs it, `cargo install tansu --locked --features
/// libsql`, and sets it), else on the `PATH`.
pub struct TansuServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl TansuServer {
    /// Started on a free port of 127.0.0.1 with an empty store; returns once it takes
    /// connections.
    ///
    /// # Panics
    /// When no `tansu` is found or it does not listen within 30 s.
    pub fn start() -> TansuServer {
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let child = Self::spawn(port, dir.path());
        TansuServer { child, port, dir }
    }

    /// The `tansu` binary this fixture runs.
    #[must_use]
    pub fn binary() -> std::path::PathBuf {
        std::env::var_os("DOCKET_TANSU").map_or_else(|| "tansu".into(), Into::into)
    }

    fn spawn(port: u16, dir: &Path) -> Child {
        let url = format!("tcp://127.0.0.1:{port}");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("tansu.log"))
            .unwrap();
        let child = Command::new(Self::binary())
            .current_dir(dir)
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url])
            .args(["--storage-engine", "sqlite://tansu.db"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("tansu (scripts/test.sh installs it: cargo install tansu --locked --features libsql)");
        listening(child, port, Duration::from_secs(30), || {
            format!(
                "tansu did not start on port {port}: {}",
                std::fs::read_to_string(dir.join("tansu.log")).unwrap_or_default()
            )
        })
    }

    /// `127.0.0.1:<port>`: librdkafka's `bootstrap.servers`.
    pub fn brokers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `kafka://127.0.0.1:<port>`: a sink's `url`.
    pub fn url(&self) -> String {
        format!("kafka://127.0.0.1:{}", self.port)
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("tansu.log")).unwrap_or_default()
    }

    /// Killed (SIGKILL).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Started again on the same port and store.
    ///
    /// # Panics
    /// As [`TansuServer::start`].
    pub fn start_again(&mut self) {
        self.child = Self::spawn(self.port, self.dir.path());
    }
}

impl Drop for TansuServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
