//! TLS for the API and dashboard (`docket serve --tls-cert FILE --tls-key FILE`): rustls with
//! the ring provider, TLS 1.2 and 1.3, HTTP/1.1. The certificate and key are PEM files;
//! [`Tls::reload`] (SIGHUP in `docket serve`) reads them again for new connections, keeping the
//! old ones when the new files do not load.

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// A certificate and key, reloadable.
#[derive(Debug)]
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    current: RwLock<Arc<ServerConfig>>,
}

fn config(cert: &Path, key: &Path) -> Result<ServerConfig, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("cannot read the certificate {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot read the certificate {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("no certificate in {}", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read the private key {}: {e}", key.display()))?;
    let mut c =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| format!("the certificate and key do not go together: {e}"))?;
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(c)
}

impl Tls {
    /// Loads the PEM certificate chain and private key.
    ///
    /// # Errors
    /// A message naming the file that does not load, or a key that does not match.
    pub fn load(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Arc<Tls>, String> {
        let (cert, key) = (cert.into(), key.into());
        let c = config(&cert, &key)?;
        Ok(Arc::new(Tls {
            cert,
            key,
            current: RwLock::new(Arc::new(c)),
        }))
    }

    /// Reads the files again; new connections use them. On error the old ones stay.
    ///
    /// # Errors
    /// As [`Tls::load`].
    pub fn reload(&self) -> Result<(), String> {
        let c = config(&self.cert, &self.key)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(c);
        Ok(())
    }

    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        let c = self
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        tokio_rustls::TlsAcceptor::from(c)
    }
}
