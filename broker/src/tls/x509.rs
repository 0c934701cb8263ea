//! Just enough of X.509 (DER) for what rustls does not say: the names in a certificate (subject,
//! issuer, subject alternative names, CN) and its validity for the messages, its version, key
//! and signature for the certificates webpki does not accept (X.509 v1, a self-signed server
//! certificate in sslrootcert: see [`super::verify`]), and its signature algorithm for channel
//! binding. It only reads: a certificate it cannot read is `None`, and rustls's verdict stands.

use std::net::IpAddr;

/// One DER element: its tag, its contents, and all of it (tag and length included).
#[derive(Clone, Copy)]
struct Tlv<'a> {
    /// The identifier octet (only low tag numbers occur in certificates).
    tag: u8,
    /// The contents.
    body: &'a [u8],
    /// Tag, length and contents, as signed or compared.
    whole: &'a [u8],
}

const BOOLEAN: u8 = 0x01;
const INTEGER: u8 = 0x02;
const BIT_STRING: u8 = 0x03;
const OCTET_STRING: u8 = 0x04;
const OID: u8 = 0x06;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
const SEQUENCE: u8 = 0x30;
/// `[0] EXPLICIT` (the version), `[3] EXPLICIT` (the extensions).
const VERSION: u8 = 0xa0;
const EXTENSIONS: u8 = 0xa3;
/// GeneralName's `dNSName [2] IA5String` and `iPAddress [7] OCTET STRING`, implicitly tagged.
const DNS_NAME: u8 = 0x82;
const IP_ADDRESS: u8 = 0x87;

/// 2.5.29.17, 2.5.29.19, 2.5.4.3.
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
const BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];
const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

/// Takes the next element off `input`.
fn next<'a>(input: &mut &'a [u8]) -> Option<Tlv<'a>> {
    let all = *input;
    let (&tag, rest) = all.split_first()?;
    if tag & 0x1f == 0x1f {
        return None;
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |len, &b| len << 8 | usize::from(b));
        rest = &rest[n..];
        len
    };
    let body = rest.get(..len)?;
    let header = all.len() - rest.len();
    *input = &rest[len..];
    Some(Tlv {
        tag,
        body,
        whole: &all[..header + len],
    })
}

/// Takes the next element off `input` if it has `tag`.
fn expect<'a>(input: &mut &'a [u8], tag: u8) -> Option<Tlv<'a>> {
    let mut peek = *input;
    let tlv = next(&mut peek).filter(|t| t.tag == tag)?;
    *input = peek;
    Some(tlv)
}

/// A BIT STRING's bits, when they are whole bytes (keys and signatures are).
fn bits(tlv: Tlv<'_>) -> Option<&[u8]> {
    match tlv.body.split_first() {
        Some((0, bits)) => Some(bits),
        _ => None,
    }
}

/// A certificate, read.
pub struct Cert<'a> {
    /// What the issuer signed: the TBSCertificate, whole.
    pub tbs: &'a [u8],
    /// X.509 v3 (webpki accepts no other version).
    pub v3: bool,
    /// The issuer's Name, whole (compared with a CA's subject).
    pub issuer: &'a [u8],
    /// The subject's Name, whole.
    pub subject: &'a [u8],
    /// Valid from (Unix seconds).
    pub not_before: i64,
    /// Valid until (Unix seconds).
    pub not_after: i64,
    /// The SubjectPublicKeyInfo, whole (a private key's public half is compared with it).
    pub spki: &'a [u8],
    /// Its AlgorithmIdentifier's contents, as rustls's `public_key_alg_id`.
    pub key_algorithm: &'a [u8],
    /// Its public key bits.
    pub key: &'a [u8],
    /// The signatureAlgorithm's contents, as rustls's `signature_alg_id`.
    pub signature_algorithm: &'a [u8],
    /// The issuer's signature over `tbs`.
    pub signature: &'a [u8],
    /// The subject alternative names of type dNSName.
    pub dns_names: Vec<String>,
    /// The subject alternative names of type iPAddress.
    pub ip_addresses: Vec<IpAddr>,
    /// basicConstraints says CA:TRUE.
    pub is_ca: bool,
    /// The extensions could not all be read: its names are unknown, so it names no host.
    pub unreadable_extensions: bool,
}

impl<'a> Cert<'a> {
    /// Reads a DER certificate; `None` if it is not one this reader understands.
    pub fn parse(der: &'a [u8]) -> Option<Cert<'a>> {
        let mut input = der;
        let mut outer = expect(&mut input, SEQUENCE)?.body;
        let tbs = expect(&mut outer, SEQUENCE)?;
        let signature_algorithm = expect(&mut outer, SEQUENCE)?.body;
        let signature = bits(expect(&mut outer, BIT_STRING)?)?;
        let mut t = tbs.body;
        let v3 = match expect(&mut t, VERSION) {
            Some(version) => {
                let mut v = version.body;
                expect(&mut v, INTEGER)?.body == [2]
            }
            None => false,
        };
        expect(&mut t, INTEGER)?; // serial number
        expect(&mut t, SEQUENCE)?; // signature (the same as signatureAlgorithm)
        let issuer = expect(&mut t, SEQUENCE)?.whole;
        let mut validity = expect(&mut t, SEQUENCE)?.body;
        let not_before = time(next(&mut validity)?)?;
        let not_after = time(next(&mut validity)?)?;
        let subject = expect(&mut t, SEQUENCE)?.whole;
        let spki = expect(&mut t, SEQUENCE)?;
        let mut s = spki.body;
        let key_algorithm = expect(&mut s, SEQUENCE)?.body;
        let key = bits(expect(&mut s, BIT_STRING)?)?;
        let mut cert = Cert {
            tbs: tbs.whole,
            v3,
            issuer,
            subject,
            not_before,
            not_after,
            spki: spki.whole,
            key_algorithm,
            key,
            signature_algorithm,
            signature,
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            is_ca: false,
            unreadable_extensions: false,
        };
        // The key is what the handshake needs; an extension this reader gets wrong must not
        // cost the connection, only the names.
        while let Some(field) = next(&mut t) {
            if field.tag == EXTENSIONS {
                let mut f = field.body;
                let read = expect(&mut f, SEQUENCE).and_then(|list| {
                    let mut list = list.body;
                    while let Some(extension) = next(&mut list) {
                        cert.extension(extension.body)?;
                    }
                    Some(())
                });
                cert.unreadable_extensions |= read.is_none();
            }
        }
        Some(cert)
    }

    /// Reads the extensions drover uses: subject alternative names, basic constraints.
    fn extension(&mut self, mut e: &'a [u8]) -> Option<()> {
        let id = expect(&mut e, OID)?.body;
        expect(&mut e, BOOLEAN); // critical
        let mut value = expect(&mut e, OCTET_STRING)?.body;
        if id == SUBJECT_ALT_NAME {
            let mut names = expect(&mut value, SEQUENCE)?.body;
            while let Some(name) = next(&mut names) {
                match (name.tag, name.body.len()) {
                    (DNS_NAME, _) => self
                        .dns_names
                        .push(String::from_utf8_lossy(name.body).into_owned()),
                    (IP_ADDRESS, 4) => self
                        .ip_addresses
                        .extend(<[u8; 4]>::try_from(name.body).ok().map(IpAddr::from)),
                    (IP_ADDRESS, 16) => self
                        .ip_addresses
                        .extend(<[u8; 16]>::try_from(name.body).ok().map(IpAddr::from)),
                    _ => {}
                }
            }
        } else if id == BASIC_CONSTRAINTS {
            let mut constraints = expect(&mut value, SEQUENCE)?.body;
            self.is_ca = expect(&mut constraints, BOOLEAN).is_some_and(|b| b.body != [0]);
        }
        Some(())
    }

    /// The names it is valid for, as OpenSSL checks them: its subject alternative names (DNS
    /// names and addresses), else the CNs of its subject.
    pub fn names(&self) -> Vec<String> {
        let mut names = self.dns_names.clone();
        names.extend(self.ip_addresses.iter().map(IpAddr::to_string));
        if names.is_empty() {
            names = common_names(self.subject);
        }
        names
    }

    /// Whether the certificate names `host` as OpenSSL's `X509_check_host` (with
    /// `NO_PARTIAL_WILDCARDS`) or `X509_check_ip` would: an address against the iPAddress
    /// names; a host name against the dNSName names, or the subject's CNs when it has none.
    pub fn names_host(&self, host: &str) -> bool {
        if self.unreadable_extensions {
            return false;
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self.ip_addresses.contains(&ip);
        }
        if self.dns_names.is_empty() {
            common_names(self.subject)
                .iter()
                .any(|cn| dns_name_matches(cn, host))
        } else {
            self.dns_names.iter().any(|n| dns_name_matches(n, host))
        }
    }
}

/// A host name against a certificate's name: equal ignoring case (and a final dot), or a
/// wildcard `*.rest` standing for exactly one whole first label, with at least two labels in
/// `rest` (OpenSSL's rule: no `*.com`, no `w*.example.com`).
pub fn dns_name_matches(pattern: &str, host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    let pattern = pattern.strip_suffix('.').unwrap_or(pattern);
    if pattern.eq_ignore_ascii_case(host) {
        return true;
    }
    let Some(rest) = pattern.strip_prefix("*.") else {
        return false;
    };
    if !rest.contains('.') || rest.contains('*') {
        return false;
    }
    match host.split_once('.') {
        Some((label, host_rest)) => !label.is_empty() && host_rest.eq_ignore_ascii_case(rest),
        None => false,
    }
}

/// The CN values of a Name.
fn common_names(name: &[u8]) -> Vec<String> {
    attributes(name)
        .filter(|(oid, _)| *oid == COMMON_NAME)
        .filter_map(|(_, value)| string(value))
        .collect()
}

/// The (type, value) pairs of a Name, in order.
fn attributes(name: &[u8]) -> impl Iterator<Item = (&[u8], Tlv<'_>)> {
    let mut rdns = {
        let mut input = name;
        expect(&mut input, SEQUENCE).map_or(&[][..], |n| n.body)
    };
    let mut set: &[u8] = &[];
    std::iter::from_fn(move || loop {
        if let Some(pair) = next(&mut set) {
            let mut p = pair.body;
            let oid = expect(&mut p, OID)?.body;
            return Some((oid, next(&mut p)?));
        }
        set = next(&mut rdns)?.body;
    })
}

/// An attribute value as text: the string types X.509 names use.
fn string(value: Tlv<'_>) -> Option<String> {
    match value.tag {
        // UTF8String, NumericString, PrintableString, IA5String, VisibleString
        0x0c | 0x12 | 0x13 | 0x16 | 0x1a => Some(String::from_utf8_lossy(value.body).into_owned()),
        // TeletexString: Latin-1 in practice, as OpenSSL reads it
        0x14 => Some(value.body.iter().map(|&b| char::from(b)).collect()),
        // BMPString: UTF-16BE
        0x1e => {
            let units = value
                .body
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]));
            Some(
                char::decode_utf16(units)
                    .map(|c| c.unwrap_or('\u{fffd}'))
                    .collect(),
            )
        }
        // UniversalString: UTF-32BE
        0x1c => Some(
            value
                .body
                .chunks_exact(4)
                .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
                .map(|c| c.unwrap_or('\u{fffd}'))
                .collect(),
        ),
        _ => None,
    }
}

/// "CN=localhost, O=Example", as OpenSSL's short names print a Name ("(no subject)" if empty).
pub fn name_text(name: &[u8]) -> String {
    let parts: Vec<String> = attributes(name)
        .filter_map(|(oid, value)| Some(format!("{}={}", attribute_name(oid), string(value)?)))
        .collect();
    if parts.is_empty() {
        "(no subject)".into()
    } else {
        parts.join(", ")
    }
}

/// OpenSSL's short name of a Name attribute; the dotted OID for one it has none for here.
fn attribute_name(oid: &[u8]) -> String {
    let short = match oid {
        [0x55, 0x04, 0x03] => "CN",
        [0x55, 0x04, 0x04] => "SN",
        [0x55, 0x04, 0x05] => "serialNumber",
        [0x55, 0x04, 0x06] => "C",
        [0x55, 0x04, 0x07] => "L",
        [0x55, 0x04, 0x08] => "ST",
        [0x55, 0x04, 0x09] => "street",
        [0x55, 0x04, 0x0a] => "O",
        [0x55, 0x04, 0x0b] => "OU",
        [0x55, 0x04, 0x0c] => "title",
        [0x55, 0x04, 0x2a] => "GN",
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01] => "emailAddress",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID",
        other => return dotted(other),
    };
    short.to_string()
}

/// An OID's dotted form.
fn dotted(oid: &[u8]) -> String {
    let mut arcs = Vec::new();
    let mut value: u64 = 0;
    for &b in oid {
        value = value << 7 | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (value / 40).min(2);
                arcs.push(first);
                arcs.push(value - first * 40);
            } else {
                arcs.push(value);
            }
            value = 0;
        }
    }
    let arcs: Vec<String> = arcs.iter().map(u64::to_string).collect();
    arcs.join(".")
}

/// The hash of `tls-server-end-point` channel binding (RFC 5929) for a certificate signed with
/// `signature_algorithm`: its own hash, SHA-256 in place of MD5 and SHA-1. `None` for an
/// algorithm without one hash (RSA-PSS, Ed25519), as OpenSSL has none for them, and for SHA-224,
/// which ring does not compute.
pub fn end_point_digest(signature_algorithm: &[u8]) -> Option<&'static ring::digest::Algorithm> {
    use ring::digest::{SHA256, SHA384, SHA512};
    let mut input = signature_algorithm;
    let oid = expect(&mut input, OID)?.body;
    const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
    const ECDSA: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04];
    const DSA_SHA2: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03];
    let (&last, prefix) = oid.split_last()?;
    match (last, prefix) {
        // md5WithRSAEncryption, sha1WithRSAEncryption; sha256/384/512WithRSAEncryption
        (4 | 5, prefix) if prefix == RSA => Some(&SHA256),
        (11, prefix) if prefix == RSA => Some(&SHA256),
        (12, prefix) if prefix == RSA => Some(&SHA384),
        (13, prefix) if prefix == RSA => Some(&SHA512),
        // ecdsa-with-SHA1; ecdsa-with-SHA256/384/512
        (1, prefix) if prefix == ECDSA => Some(&SHA256),
        (2, prefix) if prefix.strip_suffix(&[3]) == Some(ECDSA) => Some(&SHA256),
        (3, prefix) if prefix.strip_suffix(&[3]) == Some(ECDSA) => Some(&SHA384),
        (4, prefix) if prefix.strip_suffix(&[3]) == Some(ECDSA) => Some(&SHA512),
        // dsa-with-sha1; dsa-with-sha256; sha1WithRSA's old OID
        (3, [0x2a, 0x86, 0x48, 0xce, 0x38, 0x04]) => Some(&SHA256),
        (2, prefix) if prefix == DSA_SHA2 => Some(&SHA256),
        (0x1d, [0x2b, 0x0e, 0x03, 0x02]) => Some(&SHA256),
        _ => None,
    }
}

/// A UTCTime or GeneralizedTime (`YYMMDDHHMMSSZ`, `YYYYMMDDHHMMSSZ`) as Unix seconds.
fn time(tlv: Tlv<'_>) -> Option<i64> {
    let text = std::str::from_utf8(tlv.body).ok()?.strip_suffix('Z')?;
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (year, rest) = match (tlv.tag, text.len()) {
        (UTC_TIME, 12) => {
            let yy: i64 = text[..2].parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        (GENERALIZED_TIME, 14) => (text[..4].parse().ok()?, &text[4..]),
        _ => return None,
    };
    let field = |i: usize| rest[i..i + 2].parse::<i64>().ok();
    let (month, day) = (field(0)?, field(2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + field(4)? * 3600 + field(6)? * 60 + field(8)?)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix seconds as OpenSSL prints an ASN1_TIME: "Jan  2 03:04:05 2026 GMT".
pub fn time_text(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // The inverse of days_from_civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{} {day:>2} {:02}:{:02}:{:02} {year} GMT",
        MONTHS[(month - 1) as usize],
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_and_print_as_openssl_prints_them() {
        let utc = |s: &str| {
            time(Tlv {
                tag: UTC_TIME,
                body: s.as_bytes(),
                whole: &[],
            })
        };
        assert_eq!(utc("700101000000Z"), Some(0));
        assert_eq!(utc("260102030405Z"), Some(1_767_323_045));
        assert_eq!(utc("260102030405"), None);
        let generalized = |s: &str| {
            time(Tlv {
                tag: GENERALIZED_TIME,
                body: s.as_bytes(),
                whole: &[],
            })
        };
        assert_eq!(generalized("20260102030405Z"), Some(1_767_323_045));
        assert_eq!(generalized("99991231235959Z"), Some(253_402_300_799));
        assert_eq!(generalized("20261301000000Z"), None);
        assert_eq!(time_text(1_767_323_045), "Jan  2 03:04:05 2026 GMT");
        assert_eq!(time_text(951_782_400), "Feb 29 00:00:00 2000 GMT");
    }

    #[test]
    fn host_names_match_as_in_openssl() {
        assert!(dns_name_matches("localhost", "LocalHost"));
        assert!(dns_name_matches("db.example.com", "db.example.com."));
        assert!(dns_name_matches("*.example.com", "db.example.com"));
        assert!(!dns_name_matches("*.example.com", "a.db.example.com"));
        assert!(!dns_name_matches("*.example.com", "example.com"));
        assert!(!dns_name_matches("*.com", "example.com"));
        assert!(!dns_name_matches("d*.example.com", "db.example.com"));
    }

    #[test]
    fn oids_print_dotted_when_unnamed() {
        assert_eq!(
            dotted(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01]),
            "1.2.840.113549.1.9.1"
        );
        assert_eq!(attribute_name(&[0x55, 0x04, 0x03]), "CN");
    }

    #[test]
    fn reads_the_fields_drover_uses() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(vec!["db.example.com".into(), "10.0.0.1".into()])
            .unwrap();
        let mut name = rcgen::DistinguishedName::new();
        name.push(rcgen::DnType::CommonName, "db");
        name.push(rcgen::DnType::OrganizationName, "Example");
        p.distinguished_name = name;
        p.not_after = rcgen::date_time_ymd(2030, 1, 2);
        let der = p.self_signed(&key).unwrap().der().to_vec();
        let cert = Cert::parse(&der).unwrap();
        assert!(cert.v3 && !cert.is_ca && !cert.unreadable_extensions);
        assert_eq!(name_text(cert.subject), "CN=db, O=Example");
        assert_eq!(name_text(cert.issuer), "CN=db, O=Example");
        assert_eq!(cert.names(), ["db.example.com", "10.0.0.1"]);
        assert!(cert.names_host("DB.example.com") && cert.names_host("10.0.0.1"));
        // With DNS names listed, the CN does not count (OpenSSL's rule).
        assert!(!cert.names_host("db"));
        assert_eq!(time_text(cert.not_after), "Jan  2 00:00:00 2030 GMT");
        assert_eq!(cert.spki, key.public_key_der());
        assert!(end_point_digest(cert.signature_algorithm) == Some(&ring::digest::SHA256));
    }
}
