//! One PostgreSQL session speaking the simple query protocol, as psql and libpq's `PQexec` do.
//!
//! SQL tasks need what the usual drivers hide: the command tag of every statement (`DELETE 0`,
//! `INSERT 0 1`), the type of every column (pg_task quotes only text-like ones), every field of
//! an error (detail, hint, context, position) and the backend pid. So the session is written
//! here on top of `postgres-protocol`'s message codec and SCRAM/MD5 authentication, and
//! connection strings are parsed by `tokio-postgres` (both libpq's `key=value` form and URLs).
//! TLS follows libpq's `sslmode` and `sslrootcert` (see [`crate::tls`]), except that a string
//! without `sslmode` means `disable`.

use bytes::{Buf, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::{md5_hash, sasl};
use postgres_protocol::message::{backend, frontend};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_postgres::config::Host;

/// A connection-level failure: the session cannot be used any more.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The connection string could not be parsed.
    #[error("invalid connection string: {0}")]
    Config(String),
    /// No host could be reached.
    #[error("could not connect to server: {0}")]
    Connect(String),
    /// The server refused the session (authentication, unknown database or role).
    #[error("{}", .0.message())]
    Refused(ServerError),
    /// The server ended the session with FATAL or PANIC (terminated, shut down).
    #[error("{}", .0.message())]
    Fatal(ServerError),
    /// The socket failed or closed.
    #[error("connection lost: {0}")]
    Io(#[from] std::io::Error),
    /// The server sent something this client does not speak.
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl WireError {
    /// True when the session died under a running statement rather than failing it: the
    /// socket closed, or the server terminated the backend (SQLSTATE 57P01 admin_shutdown,
    /// as `pg_terminate_backend` and a server shutdown send). pg_task leaves such a task in
    /// WORK for the reset to run again instead of recording a failure.
    pub fn is_lost(&self) -> bool {
        match self {
            WireError::Io(_) => true,
            WireError::Fatal(e) => e.code() == "57P01" || e.code() == "57P02",
            _ => false,
        }
    }
}

/// An ErrorResponse: its fields by their one-byte protocol codes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerError {
    fields: Vec<(u8, String)>,
}

impl ServerError {
    /// A server-style error made up by the client (same formatting as a real one).
    pub fn synthetic(code: &str, message: impl Into<String>) -> Self {
        ServerError {
            fields: vec![
                (b'S', "ERROR".into()),
                (b'V', "ERROR".into()),
                (b'C', code.into()),
                (b'M', message.into()),
            ],
        }
    }

    /// The field with protocol code `code` (`b'M'` message, `b'D'` detail, …).
    pub fn field(&self, code: u8) -> Option<&str> {
        self.fields
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, v)| v.as_str())
    }

    /// Severity as the server localised it (`ERROR`, `FATAL`).
    pub fn severity(&self) -> &str {
        self.field(b'S').or(self.field(b'V')).unwrap_or("ERROR")
    }

    /// SQLSTATE.
    pub fn code(&self) -> &str {
        self.field(b'C').unwrap_or("")
    }

    /// Primary message.
    pub fn message(&self) -> &str {
        self.field(b'M').unwrap_or("missing error text")
    }

    /// Adds a field (`b'D'` detail, …) to an error.
    pub fn with(mut self, code: u8, value: impl Into<String>) -> Self {
        self.fields.push((code, value.into()));
        self
    }

    fn parse(body: &backend::ErrorResponseBody) -> std::io::Result<Self> {
        let mut fields = Vec::new();
        let mut it = body.fields();
        while let Some(f) = it.next()? {
            fields.push((
                f.type_(),
                String::from_utf8_lossy(f.value_bytes()).into_owned(),
            ));
        }
        Ok(ServerError { fields })
    }

    fn is_fatal(&self) -> bool {
        matches!(
            self.field(b'V').unwrap_or_else(|| self.severity()),
            "FATAL" | "PANIC"
        )
    }
}

/// A result column: name and type oid.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Column name as the server reports it.
    pub name: String,
    /// Type oid (`pg_type.oid`).
    pub type_oid: u32,
}

/// Receives the results of a query as they arrive.
pub trait ReplySink {
    /// A statement returns rows with these columns (sent before its first row, even if none).
    fn columns(&mut self, columns: &[Column]);
    /// One row, in text format; `None` is SQL NULL.
    fn row(&mut self, values: &[Option<&str>]);
    /// A statement finished; `returned_rows` tells whether it sent a row description.
    fn command(&mut self, tag: &str, returned_rows: bool);
    /// Bytes a `COPY … TO STDOUT` sent (kept as they come, as libpq's PQgetCopyData gives
    /// them); ignored unless a sink wants them.
    fn copy_data(&mut self, _data: &[u8]) {}
}

/// pg_task's message for a COPY TO STDOUT in a task it runs itself (dest.c).
pub const COPY_TO_STDOUT: &str = "COPY TO STDOUT is not supported";
/// pg_task's message for a COPY FROM STDIN (dest.c; work.c sends it as the COPY's failure).
pub const COPY_FROM_STDIN: &str = "COPY FROM STDIN is not supported";

/// What a query left behind besides what went to the sink.
#[derive(Debug, Default)]
pub struct QueryEnd {
    /// The statement error, if one ended the query (the session is still usable).
    pub error: Option<ServerError>,
    /// Transaction status after the query: `b'I'` idle, `b'T'` in a transaction, `b'E'` in a
    /// failed transaction.
    pub status: u8,
    /// The input ran COPY … TO STDOUT (its data went to the sink's `copy_data`) or tried
    /// COPY … FROM STDIN (refused with this message): pg_task's message for each.
    pub copy: Option<&'static str>,
}

trait Socket: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Socket for T {}

/// Where to send a cancel request for a session's running statement.
#[derive(Debug, Clone)]
pub struct CancelToken {
    host: Host,
    port: u16,
    pid: i32,
    secret: i32,
}

impl CancelToken {
    /// Asks the server to cancel whatever the session runs now (as `pg_cancel_backend`).
    ///
    /// # Errors
    /// The server could not be reached.
    pub async fn cancel(&self) -> Result<(), WireError> {
        // A cancel request is answered before any authentication or pg_hba rule, in plain text
        // (libpq before PostgreSQL 17 sends it so too).
        let mut s = open(
            &self.host,
            self.port,
            Duration::from_secs(10),
            &Default::default(),
        )
        .await?;
        let mut buf = BytesMut::new();
        frontend::cancel_request(self.pid, self.secret, &mut buf);
        s.write_all(&buf).await?;
        s.flush().await?;
        Ok(())
    }
}

/// An open session.
pub struct Session {
    socket: Box<dyn Socket>,
    rbuf: BytesMut,
    wbuf: BytesMut,
    pid: i32,
    cancel: CancelToken,
}

/// A parsed connection string: tokio-postgres's settings and the TLS ones it does not know.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// Hosts, ports, user, database, password, options, …
    pub config: tokio_postgres::Config,
    /// `sslmode` and `sslrootcert`.
    pub tls: crate::tls::TlsOptions,
}

impl std::ops::Deref for ConnInfo {
    type Target = tokio_postgres::Config;
    fn deref(&self) -> &tokio_postgres::Config {
        &self.config
    }
}

impl std::ops::DerefMut for ConnInfo {
    fn deref_mut(&mut self) -> &mut tokio_postgres::Config {
        &mut self.config
    }
}

/// `config` with the password of `PGPASSWORD` when it gives none (as libpq does). Only for
/// connection strings the operator configured: a raw string sent by an API client must not
/// borrow the server's credentials.
pub fn with_env_password(mut config: ConnInfo) -> ConnInfo {
    if config.get_password().is_none() {
        if let Ok(pw) = std::env::var("PGPASSWORD") {
            config.password(pw);
        }
    }
    config
}

/// Parses a libpq connection string (`host=... dbname=...`) or URL (`postgres://...`),
/// `sslmode` (`disable` when absent, `prefer`, `require`, `verify-ca`, `verify-full`) and
/// `sslrootcert` included.
///
/// # Errors
/// [`WireError::Config`] naming what is wrong.
pub fn parse_conninfo(s: &str) -> Result<ConnInfo, WireError> {
    let (rest, tls) = crate::tls::split(s).map_err(WireError::Config)?;
    let config = rest
        .parse::<tokio_postgres::Config>()
        .map_err(|e| WireError::Config(e.to_string()))?;
    Ok(ConnInfo { config, tls })
}

/// Asks the server for TLS (SSLRequest) and, when it agrees, wraps the connection; `prefer`
/// goes on in plain text when it does not, the other modes fail.
async fn negotiate(
    mut s: tokio::net::TcpStream,
    host: &str,
    tls: &crate::tls::TlsOptions,
) -> Result<Box<dyn Socket>, String> {
    use crate::tls::SslMode;
    let mut req = BytesMut::new();
    frontend::ssl_request(&mut req);
    s.write_all(&req).await.map_err(|e| e.to_string())?;
    let mut answer = [0u8; 1];
    s.read_exact(&mut answer).await.map_err(|e| e.to_string())?;
    match (answer[0], tls.mode) {
        (b'S', _) => {
            let config = crate::tls::client_config(tls)?;
            let name = rustls_pki_types::ServerName::try_from(host.to_string())
                .map_err(|e| format!("{host} is not a host name for TLS: {e}"))?;
            let stream = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
                .connect(name, s)
                .await
                .map_err(|e| format!("TLS: {e}"))?;
            Ok(Box::new(stream))
        }
        (b'N', SslMode::Prefer) => Ok(Box::new(s)),
        (b'N', _) => Err("the server does not support TLS, but sslmode requires it".into()),
        (other, _) => Err(format!(
            "unexpected answer to the TLS request: {other:#04x}"
        )),
    }
}

async fn open(
    host: &Host,
    port: u16,
    timeout: Duration,
    tls: &crate::tls::TlsOptions,
) -> Result<Box<dyn Socket>, WireError> {
    let fut = async {
        match host {
            Host::Tcp(h) => {
                let s = tokio::net::TcpStream::connect((h.as_str(), port)).await?;
                s.set_nodelay(true)?;
                if tls.mode == crate::tls::SslMode::Disable {
                    return Ok::<Box<dyn Socket>, std::io::Error>(Box::new(s));
                }
                negotiate(s, h, tls).await.map_err(std::io::Error::other)
            }
            #[cfg(unix)]
            Host::Unix(dir) => {
                let path = dir.join(format!(".s.PGSQL.{port}"));
                Ok(Box::new(tokio::net::UnixStream::connect(path).await?) as Box<dyn Socket>)
            }
        }
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(WireError::Connect(format!("{}: {e}", describe(host, port)))),
        Err(_) => Err(WireError::Connect(format!(
            "{}: timeout expired",
            describe(host, port)
        ))),
    }
}

fn describe(host: &Host, port: u16) -> String {
    match host {
        Host::Tcp(h) => format!("{h}:{port}"),
        #[cfg(unix)]
        Host::Unix(d) => format!("{}/.s.PGSQL.{port}", d.display()),
    }
}

fn default_hosts() -> Vec<Host> {
    #[cfg(unix)]
    for dir in ["/var/run/postgresql", "/tmp"] {
        if std::path::Path::new(dir).exists() {
            return vec![Host::Unix(dir.into()), Host::Tcp("localhost".into())];
        }
    }
    vec![Host::Tcp("localhost".into())]
}

fn os_user() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "postgres".into())
}

impl Session {
    /// Opens a session with `config`, trying its hosts in order, and sets `application_name`
    /// unless the connection string gives one.
    ///
    /// # Errors
    /// [`WireError::Connect`] when no host answers, [`WireError::Refused`] when the server
    /// refuses the session.
    pub async fn connect(config: &ConnInfo, application_name: &str) -> Result<Session, WireError> {
        let hosts = if config.get_hosts().is_empty() {
            default_hosts()
        } else {
            config.get_hosts().to_vec()
        };
        let timeout = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(Duration::from_secs(30));
        let mut last = None;
        for (i, host) in hosts.iter().enumerate() {
            let port = match config.get_ports() {
                [] => 5432,
                [p] => *p,
                ps => ps.get(i).copied().unwrap_or(5432),
            };
            match open(host, port, timeout, &config.tls).await {
                Ok(socket) => {
                    return Session::start(socket, host.clone(), port, config, application_name)
                        .await
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| WireError::Connect("no host".into())))
    }

    async fn start(
        socket: Box<dyn Socket>,
        host: Host,
        port: u16,
        config: &tokio_postgres::Config,
        application_name: &str,
    ) -> Result<Session, WireError> {
        let user = config
            .get_user()
            .map(str::to_string)
            .unwrap_or_else(os_user);
        let dbname = config.get_dbname().unwrap_or(&user).to_string();
        let app = config.get_application_name().unwrap_or(application_name);
        let mut params = vec![
            ("user", user.as_str()),
            ("database", dbname.as_str()),
            ("application_name", app),
            ("client_encoding", "UTF8"),
        ];
        if let Some(o) = config.get_options() {
            params.push(("options", o));
        }
        let mut s = Session {
            socket,
            rbuf: BytesMut::with_capacity(8192),
            wbuf: BytesMut::with_capacity(1024),
            pid: 0,
            cancel: CancelToken {
                host,
                port,
                pid: 0,
                secret: 0,
            },
        };
        frontend::startup_message(params.iter().copied(), &mut s.wbuf)?;
        s.flush().await?;
        let password = config.get_password().map(<[u8]>::to_vec);
        let mut scram: Option<sasl::ScramSha256> = None;
        loop {
            match s.read().await? {
                backend::Message::AuthenticationOk => {}
                backend::Message::AuthenticationCleartextPassword => {
                    let pw = password.as_deref().ok_or_else(no_password)?;
                    frontend::password_message(pw, &mut s.wbuf)?;
                    s.flush().await?;
                }
                backend::Message::AuthenticationMd5Password(body) => {
                    let pw = password.as_deref().ok_or_else(no_password)?;
                    let hash = md5_hash(user.as_bytes(), pw, body.salt());
                    frontend::password_message(hash.as_bytes(), &mut s.wbuf)?;
                    s.flush().await?;
                }
                backend::Message::AuthenticationSasl(body) => {
                    let mut mechs = body.mechanisms();
                    let mut ok = false;
                    while let Some(m) = mechs.next()? {
                        ok |= m == sasl::SCRAM_SHA_256;
                    }
                    if !ok {
                        return Err(WireError::Protocol(
                            "the server offers no SASL mechanism this client speaks".into(),
                        ));
                    }
                    let pw = password.as_deref().ok_or_else(no_password)?;
                    let sc = sasl::ScramSha256::new(pw, sasl::ChannelBinding::unsupported());
                    frontend::sasl_initial_response(
                        sasl::SCRAM_SHA_256,
                        sc.message(),
                        &mut s.wbuf,
                    )?;
                    s.flush().await?;
                    scram = Some(sc);
                }
                backend::Message::AuthenticationSaslContinue(body) => {
                    let sc = scram
                        .as_mut()
                        .ok_or_else(|| proto("unexpected SASL continue"))?;
                    sc.update(body.data())?;
                    frontend::sasl_response(sc.message(), &mut s.wbuf)?;
                    s.flush().await?;
                }
                backend::Message::AuthenticationSaslFinal(body) => {
                    let sc = scram
                        .as_mut()
                        .ok_or_else(|| proto("unexpected SASL final"))?;
                    sc.finish(body.data())?;
                }
                backend::Message::BackendKeyData(body) => {
                    s.pid = body.process_id();
                    s.cancel.pid = body.process_id();
                    s.cancel.secret = body.secret_key();
                }
                backend::Message::ParameterStatus(_) | backend::Message::NoticeResponse(_) => {}
                backend::Message::ReadyForQuery(_) => return Ok(s),
                backend::Message::ErrorResponse(body) => {
                    return Err(WireError::Refused(ServerError::parse(&body)?))
                }
                _ => return Err(proto("unexpected message during startup")),
            }
        }
    }

    /// The backend's process id (`pg_backend_pid()` of the session).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// A token to cancel this session's running statement from elsewhere.
    pub fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// Runs `sql` (any number of statements) with the simple query protocol, passing every
    /// result to `sink` as it arrives.
    ///
    /// # Errors
    /// A [`WireError`] when the session itself failed; a statement error is not one, it is
    /// returned in [`QueryEnd::error`].
    pub async fn query(
        &mut self,
        sql: &str,
        sink: &mut (dyn ReplySink + Send),
    ) -> Result<QueryEnd, WireError> {
        frontend::query(sql, &mut self.wbuf)?;
        self.flush().await?;
        let mut end = QueryEnd::default();
        let mut described = false;
        loop {
            match self.read().await? {
                backend::Message::RowDescription(body) => {
                    let mut cols = Vec::new();
                    let mut it = body.fields();
                    while let Some(f) = it.next()? {
                        cols.push(Column {
                            name: f.name().to_string(),
                            type_oid: f.type_oid(),
                        });
                    }
                    described = true;
                    sink.columns(&cols);
                }
                backend::Message::DataRow(body) => {
                    let buf = body.buffer();
                    let mut vals = Vec::new();
                    let mut ranges = body.ranges();
                    while let Some(r) = ranges.next()? {
                        vals.push(match r {
                            Some(r) => Some(
                                std::str::from_utf8(&buf[r])
                                    .map_err(|_| proto("a value is not UTF-8"))?,
                            ),
                            None => None,
                        });
                    }
                    sink.row(&vals);
                }
                backend::Message::CommandComplete(body) => {
                    sink.command(body.tag()?, described);
                    described = false;
                }
                backend::Message::EmptyQueryResponse => described = false,
                backend::Message::ErrorResponse(body) => {
                    let e = ServerError::parse(&body)?;
                    if e.is_fatal() {
                        return Err(WireError::Fatal(e));
                    }
                    end.error = Some(e);
                    described = false;
                }
                backend::Message::CopyInResponse(_) => {
                    end.copy = Some(COPY_FROM_STDIN);
                    frontend::copy_fail(COPY_FROM_STDIN, &mut self.wbuf)?;
                    self.flush().await?;
                }
                backend::Message::CopyOutResponse(_) => {
                    end.copy = Some(COPY_TO_STDOUT);
                }
                backend::Message::CopyData(body) => sink.copy_data(body.data()),
                backend::Message::CopyDone => {}
                backend::Message::ReadyForQuery(body) => {
                    end.status = body.status();
                    return Ok(end);
                }
                backend::Message::NoticeResponse(_)
                | backend::Message::NotificationResponse(_)
                | backend::Message::ParameterStatus(_) => {}
                _ => return Err(proto("unexpected message")),
            }
        }
    }

    /// Runs `sql` and ignores its results; a statement error is returned as an error.
    ///
    /// # Errors
    /// The session failed, or the statement did (`WireError::Protocol` with its message).
    pub async fn execute(&mut self, sql: &str) -> Result<(), WireError> {
        struct Nothing;
        impl ReplySink for Nothing {
            fn columns(&mut self, _: &[Column]) {}
            fn row(&mut self, _: &[Option<&str>]) {}
            fn command(&mut self, _: &str, _: bool) {}
        }
        let end = self.query(sql, &mut Nothing).await?;
        match end.error {
            Some(e) => Err(WireError::Protocol(e.message().to_string())),
            None => Ok(()),
        }
    }

    /// Says goodbye to the server (best effort).
    pub async fn close(mut self) {
        frontend::terminate(&mut self.wbuf);
        let _ = self.flush().await;
    }

    async fn flush(&mut self) -> Result<(), WireError> {
        self.socket.write_all(&self.wbuf).await?;
        self.socket.flush().await?;
        self.wbuf.clear();
        Ok(())
    }

    async fn read(&mut self) -> Result<backend::Message, WireError> {
        loop {
            if let Some(m) = backend::Message::parse(&mut self.rbuf)? {
                return Ok(m);
            }
            if self.rbuf.capacity() - self.rbuf.len() < 4096 {
                self.rbuf.reserve(8192);
            }
            let n = self.socket.read_buf(&mut self.rbuf).await?;
            if n == 0 {
                if self.rbuf.has_remaining() {
                    return Err(proto("truncated message"));
                }
                return Err(WireError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "server closed the connection unexpectedly",
                )));
            }
        }
    }
}

fn proto(m: &str) -> WireError {
    WireError::Protocol(m.to_string())
}

fn no_password() -> WireError {
    WireError::Config("the server asks for a password and none was given".into())
}
