//! Detached OpenPGP signatures of nginx release tarballs, checked with
//! `gpgv` (GnuPG's verify-only tool, which apt itself depends on, so it is
//! on every Debian and Ubuntu system) against a keyring made from the
//! armored public keys this repository keeps (`xtask/keys/`).
//!
//! `gpgv` reads binary keyrings only, so the armored keys are decoded here
//! (RFC 4880 section 6: base64 with a CRC-24 check), which needs no `gpg`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace::{root, At, Result};

/// The nginx release signing keys kept in this repository.
pub fn release_keys() -> PathBuf {
    root().join("xtask/keys")
}

/// The binary packets of every armored block in `text`, concatenated.
pub fn dearmor(text: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut blocks = 0;
    let mut lines = text.lines().map(str::trim_end);
    while let Some(line) = lines.next() {
        if !line.starts_with("-----BEGIN PGP ") {
            continue;
        }
        // Armor headers ("Comment: ...") end at the first blank line.
        for header in lines.by_ref() {
            if header.is_empty() {
                break;
            }
        }
        let (mut body, mut crc) = (String::new(), None);
        for l in lines.by_ref() {
            if l.starts_with("-----END PGP ") {
                break;
            }
            match l.strip_prefix('=') {
                Some(sum) if sum.len() == 4 => crc = Some(base64(sum)?),
                _ => body.push_str(l.trim()),
            }
        }
        let data = base64(&body)?;
        if let Some(sum) = crc {
            let want = u32::from_be_bytes([0, sum[0], sum[1], sum[2]]);
            if crc24(&data) != want {
                return Err("an armored key's CRC-24 does not match its data".into());
            }
        }
        out.extend_from_slice(&data);
        blocks += 1;
    }
    if blocks == 0 {
        return Err("no armored OpenPGP block (-----BEGIN PGP ...)".into());
    }
    Ok(out)
}

fn base64(s: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().take_while(|&c| c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return err!("`{}` is not base64", c as char),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Ok(out)
}

/// RFC 4880's CRC-24.
fn crc24(data: &[u8]) -> u32 {
    let mut crc: u32 = 0x00b7_04ce;
    for &b in data {
        crc ^= u32::from(b) << 16;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x0100_0000 != 0 {
                crc ^= 0x0186_4cfb;
            }
        }
    }
    crc & 0x00ff_ffff
}

/// Every `*.asc` of `dir` decoded into one binary keyring at `out`.
pub fn keyring(dir: &Path, out: &Path) -> Result<usize> {
    let mut ring = Vec::new();
    let mut keys = 0;
    let entries = fs::read_dir(dir).at(dir)?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "asc"))
        .collect();
    paths.sort();
    for p in paths {
        let text = fs::read_to_string(&p).at(&p)?;
        ring.extend(dearmor(&text).map_err(|e| format!("{}: {e}", p.display()))?);
        keys += 1;
    }
    if keys == 0 {
        return err!("{}: no *.asc public key", dir.display());
    }
    fs::write(out, ring).at(out)?;
    Ok(keys)
}

/// `gpgv --keyring RING SIG FILE`: the fingerprint of the key that made a
/// good signature, or why there is none.
pub fn verify(ring: &Path, sig: &Path, file: &Path) -> Result<String> {
    let out = Command::new("gpgv")
        .arg("--status-fd=1")
        .arg("--keyring")
        .arg(ring)
        .arg(sig)
        .arg(file)
        .output()
        .map_err(|e| {
            format!(
                "cannot run gpgv ({e}), which checks nginx's release signatures: \
                 apt-get install gpgv (dnf install gnupg2), or pass --sha256 with the \
                 tarball's published SHA-256"
            )
        })?;
    let status = String::from_utf8_lossy(&out.stdout);
    // gpgv exits 0 for these too: a revoked key, or a signature past its
    // own expiry, vouches for nothing.
    for bad in ["REVKEYSIG", "EXPSIG"] {
        if let Some(l) = status
            .lines()
            .find(|l| l.starts_with(&format!("[GNUPG:] {bad} ")))
        {
            return err!(
                "{} is signed by a key that is revoked or a signature that has expired ({l}); \
                 refusing it",
                file.display()
            );
        }
    }
    let valid = status.lines().find_map(|l| {
        l.strip_prefix("[GNUPG:] VALIDSIG ")
            .and_then(|rest| rest.split_whitespace().next())
    });
    match valid {
        Some(fpr) if out.status.success() => Ok(fpr.to_string()),
        _ => err!(
            "{} is not signed by {} (gpgv: {})",
            file.display(),
            sig.display(),
            String::from_utf8_lossy(&out.stderr)
                .trim()
                .replace('\n', "; ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys and their fingerprints as `xtask/keys/README.md` lists
    /// them, read by GnuPG itself.
    #[test]
    fn release_keys_are_the_four_fingerprints() {
        let home = std::env::temp_dir().join(format!("xtask-gpg-{}", std::process::id()));
        fs::create_dir_all(&home).unwrap();
        let mut got = Vec::new();
        for name in ["arut", "mdounin", "pluknet", "thresh"] {
            let out = Command::new("gpg")
                .args(["--batch", "--with-colons", "--show-keys"])
                .arg(release_keys().join(format!("{name}.asc")))
                .env("GNUPGHOME", &home)
                .output()
                .expect("gpg (Debian's gnupg, ci/packages.txt)");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let fpr = text
                .lines()
                .find_map(|l| l.strip_prefix("fpr:::::::::"))
                .map(|f| f.trim_end_matches(':').to_string());
            got.push((name, fpr.unwrap_or_default()));
        }
        let _ = fs::remove_dir_all(&home);
        assert_eq!(
            got,
            [
                (
                    "arut",
                    "43387825DDB1BB97EC36BA5D007C8D7C15D87369".to_string()
                ),
                (
                    "mdounin",
                    "B0F4253373F8F6F510D42178520A9993A1C052F8".to_string()
                ),
                (
                    "pluknet",
                    "D6786CE303D9A9022998DC6CC8464D549AF75C0A".to_string()
                ),
                (
                    "thresh",
                    "13C82A63B603576156E30A4EA0EA981B66B0D967".to_string()
                ),
            ]
        );
        // And our own decoding of them gives a keyring gpgv can read.
        let ring = std::env::temp_dir().join(format!("xtask-ring-{}.gpg", std::process::id()));
        assert_eq!(keyring(&release_keys(), &ring).unwrap(), 4);
        let bytes = fs::read(&ring).unwrap();
        let _ = fs::remove_file(&ring);
        // An old-format public key packet (tag 6) opens the ring.
        assert_eq!(bytes[0] & 0xfc, 0x98, "{:#x}", bytes[0]);
    }

    #[test]
    fn base64_and_crc24_follow_rfc4880() {
        assert_eq!(base64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64("").unwrap(), b"");
        assert!(base64("a*b").is_err());
        // RFC 4880 6.1's initial value: the CRC of nothing.
        assert_eq!(crc24(&[]), 0x00b7_04ce);
    }

    #[test]
    fn an_armored_block_is_decoded_and_its_checksum_checked() {
        let data = b"hello";
        let sum = crc24(data).to_be_bytes();
        let b64 = |b: &[u8]| {
            const A: &[u8; 64] =
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            let mut s = String::new();
            for ch in b.chunks(3) {
                let n = ch
                    .iter()
                    .enumerate()
                    .fold(0u32, |n, (i, &x)| n | (u32::from(x) << (16 - 8 * i)));
                for i in 0..=ch.len() {
                    s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
                }
            }
            s
        };
        let block = |crc: &str| {
            format!(
                "-----BEGIN PGP PUBLIC KEY BLOCK-----\nComment: x\n\n{}\n={crc}\n-----END PGP PUBLIC KEY BLOCK-----\n",
                b64(data)
            )
        };
        let good = block(&b64(&sum[1..]));
        assert_eq!(dearmor(&good).unwrap(), data);
        assert_eq!(dearmor(&format!("{good}{good}")).unwrap(), b"hellohello");
        let bad = block(&b64(&[0, 0, 0]));
        assert!(dearmor(&bad).unwrap_err().to_string().contains("CRC-24"));
        assert!(dearmor("no key here").is_err());
    }
}
