//! jsonwebtoken's verification over ring: the [`CryptoProvider`] `OAuth` installs.
//!
//! Owns: checking a JWT signature with a public key from the issuer's JWKS, for the
//! asymmetric algorithms only (RS256/384/512, PS256/384/512, ES256, ES384, EdDSA), using
//! ring (already in the binary for rustls). Must not: sign anything, or verify an HMAC
//! algorithm (a public key must never serve as a shared secret).
//!
//! jsonwebtoken leaves the choice of cryptography to a provider (its `rust_crypto`
//! feature adds about 40 crates to the build, `aws_lc_rs` a long C build); this provider
//! follows the crate's own aws-lc one (aws-lc-rs has ring's API).

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{Error, ErrorKind};
use jsonwebtoken::jwk::{EllipticCurve, ThumbprintHash};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, EncodingKey};
use ring::signature as sig;

/// The provider: verification only, every key utility refused (no JWK is built from a
/// private key here).
pub(super) static RING_PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: no_signer,
    verifier_factory: new_verifier,
    key_utils: KeyUtils {
        rsa_pub_components_from_private_key: |_| Err(unsupported()),
        rsa_pub_components_from_public_key: |_| Err(unsupported()),
        ec_pub_components_from_private_key: |_, _| Err(unsupported()),
        ed_pub_components_from_private_key: ed_unsupported,
        compute_digest,
    },
};

fn unsupported() -> Error {
    ErrorKind::UnsupportedAlgorithm.into()
}

fn ed_unsupported(_: &[u8], _: &EllipticCurve) -> Result<Vec<u8>, Error> {
    Err(unsupported())
}

fn no_signer(_: &Algorithm, _: &EncodingKey) -> Result<Box<dyn JwtSigner>, Error> {
    Err(ErrorKind::Provider("this server verifies tokens and signs none".into()).into())
}

fn compute_digest(data: &[u8], hash: ThumbprintHash) -> Result<Vec<u8>, Error> {
    let algorithm = match hash {
        ThumbprintHash::SHA256 => &ring::digest::SHA256,
        ThumbprintHash::SHA384 => &ring::digest::SHA384,
        ThumbprintHash::SHA512 => &ring::digest::SHA512,
        _ => return Err(unsupported()),
    };
    Ok(ring::digest::digest(algorithm, data).as_ref().to_vec())
}

/// How ring checks one algorithm's signatures.
enum Check {
    Rsa(&'static sig::RsaParameters),
    /// ECDSA (fixed-size `r || s`, as JWS has it) or Ed25519, over the raw public key.
    Raw(&'static dyn sig::VerificationAlgorithm),
}

/// The family a key must be of, and ring's check, for an asymmetric algorithm; `None`
/// for HMAC (and anything jsonwebtoken adds later).
fn check_of(algorithm: Algorithm) -> Option<(AlgorithmFamily, Check)> {
    use Algorithm::*;
    Some(match algorithm {
        RS256 => (
            AlgorithmFamily::Rsa,
            Check::Rsa(&sig::RSA_PKCS1_2048_8192_SHA256),
        ),
        RS384 => (
            AlgorithmFamily::Rsa,
            Check::Rsa(&sig::RSA_PKCS1_2048_8192_SHA384),
        ),
        RS512 => (
            AlgorithmFamily::Rsa,
            Check::Rsa(&sig::RSA_PKCS1_2048_8192_SHA512),
        ),
        PS256 => (
            AlgorithmFamily::Rsa,
            Check::Rsa(&sig::RSA_PSS_2048_8192_SHA256),
        ),
        PS384 => (
            AlgorithmFamily::Rsa,
            Check::Rsa(&sig::RSA_PSS_2048_8192_SHA384),
        ),
        PS512 => (
            AlgorithmFamily::Rsa,
            Check::Rsa(&sig::RSA_PSS_2048_8192_SHA512),
        ),
        ES256 => (
            AlgorithmFamily::Ec,
            Check::Raw(&sig::ECDSA_P256_SHA256_FIXED),
        ),
        ES384 => (
            AlgorithmFamily::Ec,
            Check::Raw(&sig::ECDSA_P384_SHA384_FIXED),
        ),
        EdDSA => (AlgorithmFamily::Ed, Check::Raw(&sig::ED25519)),
        _ => return None,
    })
}

/// Whether this provider verifies `algorithm` (the asymmetric ones).
pub(super) fn verifies(algorithm: Algorithm) -> bool {
    check_of(algorithm).is_some()
}

struct RingVerifier {
    algorithm: Algorithm,
    check: Check,
    key: DecodingKey,
}

fn new_verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>, Error> {
    let (family, check) = check_of(*algorithm).ok_or(ErrorKind::InvalidAlgorithm)?;
    if key.family() != family {
        return Err(ErrorKind::InvalidKeyFormat.into());
    }
    Ok(Box::new(RingVerifier {
        algorithm: *algorithm,
        check,
        key: key.clone(),
    }))
}

impl jsonwebtoken::signature::Verifier<Vec<u8>> for RingVerifier {
    fn verify(
        &self,
        message: &[u8],
        signature: &Vec<u8>,
    ) -> Result<(), jsonwebtoken::signature::Error> {
        let verified = match (&self.check, self.key.kind()) {
            (Check::Rsa(params), DecodingKeyKind::RsaModulusExponent { n, e }) => {
                sig::RsaPublicKeyComponents { n, e }.verify(params, message, signature)
            }
            (Check::Rsa(params), DecodingKeyKind::SecretOrDer(der)) => {
                sig::UnparsedPublicKey::new(*params, der).verify(message, signature)
            }
            (Check::Raw(algorithm), DecodingKeyKind::SecretOrDer(raw)) => {
                sig::UnparsedPublicKey::new(*algorithm, raw).verify(message, signature)
            }
            (Check::Raw(_), DecodingKeyKind::RsaModulusExponent { .. }) => {
                Err(ring::error::Unspecified)
            }
        };
        verified.map_err(|_| jsonwebtoken::signature::Error::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}
