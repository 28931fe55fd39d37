//! HTTPS (docs: operations/security.md): the API over TLS with a certificate from a private CA, refused
//! without trust or in plain HTTP, a reload that switches certificates for new connections and
//! keeps the old ones when the new files are bad, and the session cookie marked Secure.

use docket_core::auth::Scope;
use docket_core::SystemClock;
use docket_engine::auth::NewToken;
use docket_engine::{Engine, EngineConfig};
use docket_server::auth::AuthMode;
use docket_server::tls::Tls;
use docket_server::{AppState, ConnLimits};
use docket_store::{connect, ConnectOptions};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A CA (PEM) and a certificate + key it signed for 127.0.0.1.
fn pki() -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

fn client(ca_pem: Option<&str>) -> reqwest::Client {
    builder(ca_pem).build().unwrap()
}

fn builder(ca_pem: Option<&str>) -> reqwest::ClientBuilder {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    if let Some(pem) = ca_pem {
        for c in rustls_pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .redirect(reqwest::redirect::Policy::none())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_reload_and_secure_cookie() {
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let (ca1, cert1, key1) = pki();
    std::fs::write(&cert_path, &cert1).unwrap();
    std::fs::write(&key_path, &key1).unwrap();
    let tls = Tls::load(&cert_path, &key_path).unwrap();

    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = connect(&ConnectOptions::new(url)).await.unwrap();
    store.migrate().await.unwrap();
    let engine = Engine::new(
        store.clone(),
        Arc::new(SystemClock),
        EngineConfig::new("tls", store.backend()),
    );
    let stop = CancellationToken::new();
    engine.start(stop.clone()).await.unwrap();
    let (token, _) = engine
        .token_create(NewToken {
            name: "root".into(),
            scopes: vec![Scope::Admin],
            ..Default::default()
        })
        .await
        .unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let state = AppState::new(engine, stop.clone()).with_auth(AuthMode::Required);
    tokio::spawn(docket_server::serve_tls(
        l,
        state,
        ConnLimits::default(),
        tls.clone(),
    ));
    let base = format!("https://127.0.0.1:{port}");

    // Trusting the CA: served. Not trusting it, or speaking plain HTTP: no answer.
    let r = client(Some(&ca1))
        .get(format!("{base}/v1/tasks"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(client(None)
        .get(format!("{base}/healthz"))
        .send()
        .await
        .is_err());
    // Trusting the CA but reaching the server under a name its certificate does not carry:
    // refused too (the client checks the host name, not only the chain).
    let wrong = builder(Some(&ca1))
        .resolve("docket.invalid", ([127, 0, 0, 1], port).into())
        .build()
        .unwrap()
        .get(format!("https://docket.invalid:{port}/healthz"))
        .send()
        .await;
    let err = wrong.expect_err("a certificate for another name is refused");
    assert!(
        format!("{err:?}").contains("NotValidForName"),
        "the refusal names the host check: {err:?}"
    );
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send()
        .await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());

    // The session cookie is Secure over TLS.
    let r = client(Some(&ca1))
        .post(format!("{base}/ui/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let set = r.headers()["set-cookie"].to_str().unwrap();
    assert!(
        set.contains("; Secure") && set.contains("HttpOnly"),
        "{set}"
    );

    // A reload switches new connections to the new certificate.
    let (ca2, cert2, key2) = pki();
    std::fs::write(&cert_path, &cert2).unwrap();
    std::fs::write(&key_path, &key2).unwrap();
    tls.reload().unwrap();
    assert_eq!(
        client(Some(&ca2))
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert!(client(Some(&ca1))
        .get(format!("{base}/healthz"))
        .send()
        .await
        .is_err());
    // Bad files: the reload fails and the current certificate stays.
    std::fs::write(&cert_path, "not a certificate").unwrap();
    assert!(tls.reload().is_err());
    std::fs::write(&cert_path, &cert1).unwrap();
    assert!(
        tls.reload().is_err(),
        "key 2 does not go with certificate 1"
    );
    assert_eq!(
        client(Some(&ca2))
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    stop.cancel();
}

/// The handshake is bounded like a request head: a client that connects and never finishes
/// it is dropped after the header-read timeout, and its connection slot is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_handshake_is_dropped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let (ca, cert, key) = pki();
    std::fs::write(&cert_path, &cert).unwrap();
    std::fs::write(&key_path, &key).unwrap();
    let tls = Tls::load(&cert_path, &key_path).unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = connect(&ConnectOptions::new(url)).await.unwrap();
    store.migrate().await.unwrap();
    let engine = Engine::new(
        store.clone(),
        Arc::new(SystemClock),
        EngineConfig::new("tls", store.backend()),
    );
    let stop = CancellationToken::new();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let limits = ConnLimits {
        header_read_timeout: std::time::Duration::from_millis(500),
        max_connections: 1,
    };
    tokio::spawn(docket_server::serve_tls(
        l,
        AppState::new(engine, stop.clone()),
        limits,
        tls,
    ));
    // Half a ClientHello record header, then silence.
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
    let t = std::time::Instant::now();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(std::time::Duration::from_secs(20), tcp.read(&mut buf))
        .await
        .expect("the server closed the stalled connection")
        .unwrap_or(0);
    assert_eq!(n, 0, "closed without an answer");
    assert!(
        t.elapsed() >= std::time::Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    // The one slot is free again: a real client is served.
    let r = client(Some(&ca))
        .get(format!("https://{addr}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    stop.cancel();
}
