//! TLS of SQL sessions (`sql` targets, pg_task) and of docket's own PostgreSQL connections, as
//! libpq's sslmode, against the test PostgreSQL, which serves Debian's snakeoil certificate
//! (CN localhost; `scripts/test.sh` turns TLS on when it is off).

use docket_sql::format::Format;
use std::time::Duration;

const ROOT: &str = "/etc/ssl/certs/ssl-cert-snakeoil.pem";

/// Whether the session `conn` opens is encrypted, by the server's own account.
async fn ssl_of(conn: &str) -> Result<String, String> {
    let c = docket_sql::wire::parse_conninfo(conn).map_err(|e| e.to_string())?;
    let r = docket_sql::run_sql(
        &c,
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        Format::default(),
        Duration::ZERO,
        "docket tls test",
    )
    .await;
    match r.error {
        Some(e) => Err(e),
        None => Ok(r.output.unwrap_or_default()),
    }
}

#[tokio::test]
async fn sql_sessions_follow_sslmode() {
    let kv = |host: &str, extra: &str| format!("host={host} user=postgres dbname=postgres {extra}");
    // No sslmode: plain text (docket's default, unlike libpq's prefer).
    assert_eq!(ssl_of(&kv("127.0.0.1", "")).await.unwrap(), "f");
    assert_eq!(
        ssl_of(&kv("127.0.0.1", "sslmode=disable")).await.unwrap(),
        "f"
    );
    assert_eq!(
        ssl_of(&kv("127.0.0.1", "sslmode=prefer")).await.unwrap(),
        "t"
    );
    assert_eq!(
        ssl_of(&kv("127.0.0.1", "sslmode=require")).await.unwrap(),
        "t"
    );
    assert_eq!(
        ssl_of("postgres://postgres@127.0.0.1:5432/postgres?sslmode=require")
            .await
            .unwrap(),
        "t"
    );
    // verify-full: the certificate must chain to sslrootcert and name the host.
    let root = format!("sslrootcert={ROOT}");
    assert_eq!(
        ssl_of(&kv("localhost", &format!("sslmode=verify-full {root}")))
            .await
            .unwrap(),
        "t"
    );
    let e = ssl_of(&kv("127.0.0.1", &format!("sslmode=verify-full {root}")))
        .await
        .unwrap_err();
    assert!(e.contains("TLS") && e.contains("not valid for name"), "{e}");
    // verify-ca: the chain, not the name.
    assert_eq!(
        ssl_of(&kv("127.0.0.1", &format!("sslmode=verify-ca {root}")))
            .await
            .unwrap(),
        "t"
    );
    // A certificate from another CA than sslrootcert's is refused.
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other-ca.pem");
    let key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    std::fs::write(&other, ca.self_signed(&key).unwrap().pem()).unwrap();
    let e = ssl_of(&kv(
        "localhost",
        &format!("sslmode=verify-full sslrootcert={}", other.display()),
    ))
    .await
    .unwrap_err();
    assert!(
        e.contains("UnknownIssuer") || e.contains("unknown issuer"),
        "{e}"
    );
    // Bad settings are refused before connecting.
    assert!(ssl_of(&kv("localhost", "sslmode=sometimes")).await.is_err());
    let e = ssl_of(&kv(
        "localhost",
        "sslmode=verify-full sslrootcert=/nonexistent.pem",
    ))
    .await
    .unwrap_err();
    assert!(e.contains("sslrootcert"), "{e}");
}

/// docket's own store (sqlx) takes the same sslmode in its URL.
#[tokio::test]
async fn docket_store_connects_over_verified_tls() {
    let schema = format!("t_tls_{}", uuid::Uuid::new_v4().simple());
    let open = |host: &str| docket_store::ConnectOptions {
        url: format!(
            "postgres://postgres@{host}:5432/postgres?sslmode=verify-full&sslrootcert={ROOT}"
        ),
        schema: Some(schema.clone()),
        max_connections: Some(2),
        strict_commit: false,
    };
    let store = docket_store::connect(&open("localhost")).await.unwrap();
    store.migrate().await.unwrap();
    store.close().await;
    // The same certificate does not name 127.0.0.1: refused.
    assert!(docket_store::connect(&open("127.0.0.1")).await.is_err());
}
