//! TLS of SQL sessions (`sql` targets, pg_task task sessions), as libpq's `sslmode`:
//! `disable`, `prefer` (TLS when the server offers it), `require` (TLS, certificate not
//! checked), `verify-ca` (TLS, certificate signed by a trusted CA), `verify-full` (and issued for
//! the host name). `sslrootcert=FILE` names the trusted CAs (PEM); without it the system's.
//! rustls with the ring provider; Unix-socket sessions never use TLS (as libpq).

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, Error as TlsError, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use std::path::PathBuf;
use std::sync::Arc;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SslMode {
    /// Plain TCP. The default when no `sslmode` is given (libpq's is `prefer`): TLS that
    /// checks nothing protects against no active attacker and costs a handshake per session.
    #[default]
    Disable,
    /// TLS when the server offers it, else plain.
    Prefer,
    /// TLS; the certificate is not checked.
    Require,
    /// TLS with a certificate signed by a trusted CA.
    VerifyCa,
    /// TLS with a trusted certificate issued for the host.
    VerifyFull,
}

/// TLS settings of a connection string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// `sslmode`.
    pub mode: SslMode,
    /// `sslrootcert`: PEM file of trusted CAs (default: the system's).
    pub root_cert: Option<PathBuf>,
}

/// Takes `sslmode` and `sslrootcert` out of a connection string (URL query or `key=value`
/// form), returning the string that is left (for tokio-postgres, which knows neither
/// `verify-*` nor `sslrootcert`) and the TLS options.
///
/// # Errors
/// An unknown `sslmode`.
pub fn split(conninfo: &str) -> Result<(String, TlsOptions), String> {
    let mut o = TlsOptions::default();
    let mut take = |k: &str, v: &str| -> Result<bool, String> {
        match k {
            "sslmode" => {
                o.mode = match v {
                    "disable" => SslMode::Disable,
                    "allow" | "prefer" => SslMode::Prefer,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    _ => return Err(format!("invalid sslmode {v:?}: disable, allow, prefer, require, verify-ca or verify-full")),
                };
                Ok(true)
            }
            "sslrootcert" => {
                o.root_cert = Some(PathBuf::from(v));
                Ok(true)
            }
            _ => Ok(false),
        }
    };
    let rest = if conninfo.starts_with("postgres://") || conninfo.starts_with("postgresql://") {
        match conninfo.split_once('?') {
            None => conninfo.to_string(),
            Some((base, q)) => {
                let mut kept = Vec::new();
                for kv in q.split('&').filter(|s| !s.is_empty()) {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    if !take(k, &percent_decode(v))? {
                        kept.push(kv);
                    }
                }
                if kept.is_empty() {
                    base.to_string()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
        }
    } else {
        let mut kept = Vec::new();
        for kv in conninfo.split_whitespace() {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            if !take(k.trim(), v.trim_matches('\''))? {
                kept.push(kv);
            }
        }
        kept.join(" ")
    };
    Ok((rest, o))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Accepts any certificate (`require`: encrypted, not authenticated, as libpq).
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Checks the chain but not the name (`verify-ca`).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end: &CertificateDer<'_>,
        mid: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        match self.0.verify_server_cert(end, mid, name, ocsp, now) {
            Err(TlsError::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(TlsError::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls12_signature(m, c, d)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls13_signature(m, c, d)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The rustls client configuration of `o`.
///
/// # Errors
/// An `sslrootcert` that does not load.
pub fn client_config(o: &TlsOptions) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    if matches!(
        o.mode,
        SslMode::Disable | SslMode::Prefer | SslMode::Require
    ) {
        return Ok(builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
            .with_no_client_auth());
    }
    let mut roots = rustls::RootCertStore::empty();
    match &o.root_cert {
        Some(p) => {
            let bad = |e: &dyn std::fmt::Display| format!("sslrootcert {}: {e}", p.display());
            for c in CertificateDer::pem_file_iter(p).map_err(|e| bad(&e))? {
                roots.add(c.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
            }
            if roots.is_empty() {
                return Err(bad(&"no certificate in it"));
            }
        }
        None => {
            for c in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(c);
            }
        }
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| e.to_string())?;
    Ok(match o.mode {
        SslMode::VerifyCa => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
            .with_no_client_auth(),
        _ => builder.with_webpki_verifier(webpki).with_no_client_auth(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_tls_settings_out_of_both_forms() {
        let (rest, o) = split(
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u@h/db?connect_timeout=3");
        assert_eq!(o.mode, SslMode::VerifyFull);
        assert_eq!(o.root_cert, Some(PathBuf::from("/etc/ca.pem")));
        let (rest, o) = split("host=h sslmode=require dbname=d").unwrap();
        assert_eq!(rest, "host=h dbname=d");
        assert_eq!((o.mode, o.root_cert), (SslMode::Require, None));
        let (rest, o) = split("postgres://h/db").unwrap();
        assert_eq!(
            (rest.as_str(), o.mode),
            ("postgres://h/db", SslMode::Disable)
        );
        assert!(split("host=h sslmode=always").is_err());
    }
}
