//! TLS to PostgreSQL: libpq's `sslmode` and `sslrootcert`, over rustls (no OpenSSL).
//!
//! Owns: reading the URL's TLS settings ([`TlsSettings::take_from_url`]: `sslmode`,
//! `sslrootcert`, `sslsni`, taken out of the URL before the driver's parser sees it, which
//! knows neither `verify-ca`, `verify-full` nor `sslrootcert`); what each mode means, as
//! libpq means it ([`SslMode`]); the rustls configuration each mode gets ([`connector`]:
//! the root certificates, and the verifier: none, the chain only, or chain and host name);
//! and saying why a TLS handshake failed ([`failure`]). Must not: open a connection (the
//! one connect path is [`super::connect::Target::connect`]), or print a password.

use super::error::PgError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_cert_signed_by_trust_anchor};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The ALPN protocol libpq 17 offers (and a server taking direct TLS requires).
const ALPN_POSTGRESQL: &[u8] = b"postgresql";

/// libpq's TLS parameters this build does not support (client certificates, revocation
/// lists): named in the error rather than ignored.
const UNSUPPORTED_PARAMETERS: &[&str] = &[
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcertmode",
    "sslcrl",
    "sslcrldir",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
];

/// libpq's `sslmode`: whether to encrypt, and what to check of the server's certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// No TLS.
    Disable,
    /// TLS if the server offers it, plain otherwise (and after a failed handshake); the
    /// certificate is not checked (unless `sslrootcert` names a file: then its chain is).
    /// libpq's default.
    Prefer,
    /// TLS or no connection; the certificate is not checked (unless `sslrootcert` names
    /// a file: then its chain is, as `verify-ca`).
    Require,
    /// TLS, and the certificate's chain leads to a trusted root; any host name.
    VerifyCa,
    /// TLS, the chain leads to a trusted root, and the certificate names the host.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, PgError> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            // libpq's `allow` tries plain first: a server that refuses plain gets TLS.
            // Rare, and not what anyone asking for TLS wants: named rather than guessed.
            other => {
                return Err(PgError::BadTls(format!(
                    "unknown sslmode={other:?} (known: disable, prefer, require, verify-ca, \
                     verify-full)"
                )));
            }
        })
    }

    /// The name libpq gives it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// Where the trusted root certificates come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Roots {
    /// `sslrootcert=FILE`: the PEM certificates in it.
    File(PathBuf),
    /// `sslrootcert=system`, or `verify-*` without `sslrootcert`: the platform's store.
    System,
}

impl Roots {
    /// How a message names them.
    fn describe(&self) -> String {
        match self {
            Roots::File(path) => format!("sslrootcert={}", path.display()),
            Roots::System => "the system's root certificates".to_string(),
        }
    }
}

/// The TLS settings of a PostgreSQL URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    pub(crate) mode: SslMode,
    /// `sslrootcert` as given (`None`: not given).
    pub(crate) root_cert: Option<Roots>,
    /// `sslsni=0` turns off sending the host name in the handshake.
    pub(crate) sni: bool,
}

impl TlsSettings {
    /// Takes `sslmode`, `sslrootcert` and `sslsni` out of `url`'s query and returns them
    /// with the rest of the URL, for the driver's parser. Refuses an unknown `sslmode`, the
    /// TLS parameters this build does not support, and what libpq refuses
    /// (`sslrootcert=system` with a mode weaker than `verify-full`).
    pub(crate) fn take_from_url(url: &str) -> Result<(TlsSettings, String), PgError> {
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, query),
            None => (url, ""),
        };
        let mut mode = None;
        let mut root_cert = None;
        let mut sni = true;
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = decode(key);
            let value = decode(value);
            match key.as_str() {
                "sslmode" => mode = Some(SslMode::parse(&value)?),
                "sslrootcert" if value == "system" => root_cert = Some(Roots::System),
                "sslrootcert" => root_cert = Some(Roots::File(PathBuf::from(value))),
                "sslsni" => sni = value != "0",
                known if UNSUPPORTED_PARAMETERS.contains(&known) => {
                    return Err(PgError::BadTls(format!(
                        "{known} is not supported by this build (TLS settings it knows: \
                         sslmode, sslrootcert, sslsni)"
                    )));
                }
                _ => rest.push(pair),
            }
        }
        let mode = match (mode, &root_cert) {
            (Some(mode), _) => mode,
            // libpq 16: sslrootcert=system makes verify-full the default.
            (None, Some(Roots::System)) => SslMode::VerifyFull,
            (None, _) => SslMode::Prefer,
        };
        if root_cert == Some(Roots::System) && mode != SslMode::VerifyFull {
            return Err(PgError::BadTls(format!(
                "weak sslmode={} may not be used with sslrootcert=system (use verify-full)",
                mode.name()
            )));
        }
        let url = if rest.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        Ok((
            TlsSettings {
                mode,
                root_cert,
                sni,
            },
            url,
        ))
    }

    /// The driver's mode: whether to ask for TLS, and whether plain will do.
    pub(crate) fn driver_mode(&self) -> postgres::config::SslMode {
        match self.mode {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                postgres::config::SslMode::Require
            }
        }
    }

    /// The roots the certificate's chain is checked against, if it is checked: libpq
    /// checks the chain under `prefer` and `require` too when `sslrootcert` names a file.
    fn roots(&self) -> Option<Roots> {
        match self.mode {
            SslMode::Disable => None,
            SslMode::Prefer | SslMode::Require => self.root_cert.clone(),
            SslMode::VerifyCa | SslMode::VerifyFull => {
                Some(self.root_cert.clone().unwrap_or(Roots::System))
            }
        }
    }

    /// What is checked of the server's certificate, for `doctor`.
    pub(crate) fn checks(&self) -> String {
        match (self.mode, self.roots()) {
            (SslMode::Disable, _) => "none (sslmode=disable)".to_string(),
            (SslMode::VerifyFull, Some(roots)) => format!(
                "chain and host name, against {} (sslmode=verify-full)",
                roots.describe()
            ),
            (mode, Some(roots)) => format!(
                "chain, against {}, not the host name (sslmode={})",
                roots.describe(),
                mode.name()
            ),
            (mode, None) => format!(
                "not verified (sslmode={}: use verify-full to check it)",
                mode.name()
            ),
        }
    }
}

fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// The driver's TLS connector for `settings` (`None` for `disable`): the root certificates
/// are read here, once, so a missing or empty file fails at start.
pub(crate) fn connector(settings: &TlsSettings) -> Result<Option<MakeRustlsConnect>, PgError> {
    if settings.mode == SslMode::Disable {
        return Ok(None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| PgError::BadTls(format!("TLS setup: {e}")))?;
    let algorithms = provider.signature_verification_algorithms;
    let verifier: Arc<dyn ServerCertVerifier> = match settings.roots() {
        None => Arc::new(NoHostCheck {
            roots: None,
            algorithms,
        }),
        Some(roots) => {
            let store = Arc::new(load_roots(&roots)?);
            match settings.mode {
                SslMode::VerifyFull => WebPkiServerVerifier::builder_with_provider(store, provider)
                    .build()
                    .map_err(|e| PgError::BadTls(format!("TLS setup: {e}")))?,
                _ => Arc::new(NoHostCheck {
                    roots: Some(store),
                    algorithms,
                }),
            }
        }
    };
    let mut config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN_POSTGRESQL.to_vec()];
    config.enable_sni = settings.sni;
    Ok(Some(MakeRustlsConnect::new(config)))
}

fn load_roots(roots: &Roots) -> Result<RootCertStore, PgError> {
    let mut store = RootCertStore::empty();
    let root_error = |reason: String| PgError::RootCerts {
        roots: roots.describe(),
        reason,
    };
    let certs: Vec<CertificateDer<'static>> = match roots {
        Roots::File(path) => CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| root_error(e.to_string()))?,
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            if found.certs.is_empty() {
                let errors: Vec<String> = found.errors.iter().map(|e| e.to_string()).collect();
                return Err(root_error(format!(
                    "none found ({}); install the system's CA bundle (ca-certificates) or \
                     name a file with sslrootcert=FILE",
                    if errors.is_empty() {
                        "no error".to_string()
                    } else {
                        errors.join("; ")
                    }
                )));
            }
            found.certs
        }
    };
    let (added, _unparsable) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(root_error("it holds no usable certificate".to_string()));
    }
    Ok(store)
}

/// Every mode short of `verify-full`: the host name is not checked (libpq's meaning).
/// With `roots` (`verify-ca`, or `prefer`/`require` with `sslrootcert`) the certificate's
/// chain must lead to one of them; without (`prefer` and `require` alone) the certificate
/// is not checked and the connection is only encrypted. The handshake's signatures are
/// checked either way.
#[derive(Debug)]
struct NoHostCheck {
    roots: Option<Arc<RootCertStore>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for NoHostCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = ParsedCertificate::try_from(end_entity)?;
            verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Why the TLS part of a connection failed, said so that a user can act on it; `None`
/// when `error` is not about TLS.
pub(crate) fn failure(error: &postgres::Error, settings: &TlsSettings) -> Option<String> {
    if error.as_db_error().is_some() {
        return None;
    }
    if let Some(cause) = rustls_error(error) {
        return Some(describe_rustls(cause, settings));
    }
    let text = error.to_string();
    if text.contains("server does not support TLS") {
        return Some(format!(
            "the server does not offer TLS, and sslmode={} requires it (turn ssl on in the \
             server's postgresql.conf, or connect another way)",
            settings.mode.name()
        ));
    }
    text.contains("TLS").then_some(
        std::iter::successors(Some(error as &dyn std::error::Error), |e| e.source())
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join(": "),
    )
}

/// The rustls error somewhere in `error`'s chain (tokio-rustls wraps it in an io::Error,
/// whose `source` skips it: looked for inside each io::Error too).
fn rustls_error(error: &postgres::Error) -> Option<&rustls::Error> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(cause) = next {
        if let Some(found) = cause.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        if let Some(found) = cause
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(found);
        }
        next = cause.source();
    }
    None
}

fn describe_rustls(error: &rustls::Error, settings: &TlsSettings) -> String {
    let roots = settings
        .roots()
        .map(|roots| roots.describe())
        .unwrap_or_else(|| "no roots".to_string());
    match error {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => format!(
            "the server's certificate is not signed by a CA of {roots} (unknown issuer): name \
             the CA that signed it with sslrootcert=FILE"
        ),
        // A root of the same name as the certificate's issuer, with another key.
        rustls::Error::InvalidCertificate(CertificateError::BadSignature) => format!(
            "the server's certificate is not signed by a CA of {roots} (a CA of the same name \
             but another key: bad signature): name the CA that signed it with sslrootcert=FILE"
        ),
        rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            expected,
            presented,
        }) => format!(
            "the server's certificate is not valid for the host name {:?} (it names {}): \
             connect by one of those names (or use sslmode=verify-ca, which checks the chain \
             only)",
            expected.to_str(),
            if presented.is_empty() {
                "no host".to_string()
            } else {
                presented
                    .iter()
                    .map(|name| presented_name(name))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
        rustls::Error::InvalidCertificate(CertificateError::NotValidForName) => {
            "the server's certificate is not valid for the host name connected to (or use \
             sslmode=verify-ca, which checks the chain only)"
                .to_string()
        }
        rustls::Error::InvalidCertificate(
            CertificateError::Expired | CertificateError::ExpiredContext { .. },
        ) => format!("the server's certificate has expired ({error})"),
        rustls::Error::InvalidCertificate(_) => {
            format!("the server's certificate was refused: {error} (checked against {roots})")
        }
        other => format!("the TLS handshake failed: {other}"),
    }
}

/// A name of the certificate as rustls presents it (`DnsName("db.example")`,
/// `IpAddress(10.0.0.1)`), as a user writes it.
fn presented_name(name: &str) -> &str {
    for (open, close) in [("DnsName(\"", "\")"), ("IpAddress(", ")")] {
        if let Some(inner) = name
            .strip_prefix(open)
            .and_then(|rest| rest.strip_suffix(close))
        {
            return inner;
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(url: &str) -> Result<(TlsSettings, String), String> {
        TlsSettings::take_from_url(url).map_err(|e| e.to_string())
    }

    #[test]
    fn libpq_defaults_and_the_parameters_taken_out_of_the_url() {
        let (settings, rest) = take("postgres://u:p@db:5432/x").unwrap();
        assert_eq!(settings.mode, SslMode::Prefer);
        assert_eq!(settings.root_cert, None);
        assert_eq!(rest, "postgres://u:p@db:5432/x");

        let (settings, rest) = take(
            "postgres://u@db/x?application_name=a&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(settings.mode, SslMode::VerifyFull);
        assert_eq!(settings.root_cert, Some(Roots::File("/tmp/ca.pem".into())));
        assert_eq!(
            rest,
            "postgres://u@db/x?application_name=a&connect_timeout=3"
        );
        assert!(settings.sni);

        let (settings, rest) = take("postgres://db/x?sslrootcert=system&sslsni=0").unwrap();
        assert_eq!(
            settings.mode,
            SslMode::VerifyFull,
            "system implies verify-full"
        );
        assert_eq!(settings.root_cert, Some(Roots::System));
        assert!(!settings.sni);
        assert_eq!(rest, "postgres://db/x");
    }

    #[test]
    fn each_mode_maps_to_what_the_driver_asks_for_and_what_is_checked() {
        use postgres::config::SslMode as Driver;
        let expect = [
            ("disable", Driver::Disable, "none"),
            ("prefer", Driver::Prefer, "not verified"),
            ("require", Driver::Require, "not verified"),
            ("verify-ca", Driver::Require, "chain, against the system's"),
            ("verify-full", Driver::Require, "chain and host name"),
        ];
        for (mode, driver, checks) in expect {
            let (settings, _) = take(&format!("postgres://db/x?sslmode={mode}")).unwrap();
            assert_eq!(settings.mode.name(), mode);
            assert_eq!(settings.driver_mode(), driver, "{mode}");
            assert!(
                settings.checks().starts_with(checks),
                "{mode}: {}",
                settings.checks()
            );
        }
        // libpq: require with a root file checks the chain, like verify-ca.
        let (settings, _) = take("postgres://db/x?sslmode=require&sslrootcert=/ca.pem").unwrap();
        assert!(
            settings
                .checks()
                .starts_with("chain, against sslrootcert=/ca.pem")
        );
    }

    #[test]
    fn unknown_and_unsupported_settings_are_refused_by_name() {
        let error = take("postgres://db/x?sslmode=verify_full").unwrap_err();
        assert!(error.contains("unknown sslmode=\"verify_full\""), "{error}");
        let error = take("postgres://db/x?sslmode=require&sslrootcert=system").unwrap_err();
        assert!(error.contains("weak sslmode=require"), "{error}");
        let error = take("postgres://db/x?sslcert=/c.pem").unwrap_err();
        assert!(error.contains("sslcert is not supported"), "{error}");
    }

    #[test]
    fn certificate_names_are_shown_as_written() {
        assert_eq!(presented_name("DnsName(\"db.example\")"), "db.example");
        assert_eq!(presented_name("IpAddress(127.0.0.1)"), "127.0.0.1");
        assert_eq!(presented_name("*.example"), "*.example");
    }

    #[test]
    fn a_root_file_that_is_missing_or_holds_no_certificate_fails_at_setup() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let url = format!(
            "postgres://db/x?sslmode=verify-full&sslrootcert={}",
            missing.display()
        );
        let (settings, _) = TlsSettings::take_from_url(&url).unwrap();
        let error = connector(&settings).err().unwrap().to_string();
        assert!(error.contains("missing.pem"), "{error}");

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let url = format!(
            "postgres://db/x?sslmode=verify-ca&sslrootcert={}",
            empty.display()
        );
        let (settings, _) = TlsSettings::take_from_url(&url).unwrap();
        let error = connector(&settings).err().unwrap().to_string();
        assert!(error.contains("empty.pem"), "{error}");

        let (settings, _) = TlsSettings::take_from_url("postgres://db/x?sslmode=disable").unwrap();
        assert!(connector(&settings).unwrap().is_none());
    }
}
