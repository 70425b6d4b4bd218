//! What building the module for the operator's nginx needs on this
//! machine (a C compiler, the headers its flags ask for, libclang, and for
//! a download curl and gpgv), checked first; the missing ones named with
//! the one `apt-get install` (or `dnf install`) line that provides them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::source;
use crate::workspace::Result;

/// A build prerequisite: how to tell it is there, and its packages.
struct Prerequisite {
    what: &'static str,
    apt: &'static str,
    dnf: &'static str,
}

const CC: Prerequisite = Prerequisite {
    what: "a C compiler (cc)",
    apt: "gcc",
    dnf: "gcc",
};
const CURL: Prerequisite = Prerequisite {
    what: "curl (the download from nginx.org)",
    apt: "curl",
    dnf: "curl",
};
const GPGV: Prerequisite = Prerequisite {
    what: "gpgv (the release signature's check)",
    apt: "gpgv",
    dnf: "gnupg2",
};
const LIBCLANG: Prerequisite = Prerequisite {
    what: "libclang (bindgen)",
    apt: "libclang-dev",
    dnf: "clang-devel",
};

/// Headers `configure` needs for the flags: (header, prerequisite).
fn headers(flags: &[String]) -> Vec<(&'static str, Prerequisite)> {
    let has = |f: &str| flags.iter().any(|x| x == f);
    let mut out = Vec::new();
    if flags.iter().any(|f| f.contains("ssl_module")) {
        out.push((
            "#include <openssl/ssl.h>",
            Prerequisite {
                what: "OpenSSL headers",
                apt: "libssl-dev",
                dnf: "openssl-devel",
            },
        ));
    }
    if !has("--without-pcre") && !has("--without-http_rewrite_module") {
        out.push((
            // nginx takes PCRE2, or the older PCRE when that is all there is.
            "#if __has_include(<pcre2.h>)\n#else\n#include <pcre.h>\n#endif",
            Prerequisite {
                what: "PCRE2 headers",
                apt: "libpcre2-dev",
                dnf: "pcre2-devel",
            },
        ));
    }
    if !has("--without-http_gzip_module") {
        out.push((
            "#include <zlib.h>",
            Prerequisite {
                what: "zlib headers",
                apt: "zlib1g-dev",
                dnf: "zlib-devel",
            },
        ));
    }
    out
}

fn has_libclang() -> bool {
    let mut dirs: Vec<PathBuf> = std::env::var_os("LIBCLANG_PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(
        [
            "/usr/lib",
            "/usr/lib64",
            "/usr/local/lib",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
        ]
        .map(PathBuf::from),
    );
    for base in ["/usr/lib", "/usr/lib64"] {
        if let Ok(rd) = fs::read_dir(base) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with("llvm") {
                    dirs.push(e.path().join("lib"));
                    dirs.push(e.path().join("lib64"));
                }
            }
        }
    }
    dirs.iter().any(|d| {
        fs::read_dir(d).is_ok_and(|rd| {
            rd.flatten().any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("libclang") && n.contains(".so")
            })
        })
    })
}

/// Every prerequisite of configuring with `flags` and running bindgen,
/// checked; the missing ones named with the one line that installs them.
pub(super) fn check_prerequisites(flags: &[String], download: Option<&source::Options>) -> Result {
    let mut missing = Vec::new();
    let runs = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    // A download needs curl, and gpgv unless a SHA-256 stands in for the
    // signature.
    if let Some(opts) = download {
        if !runs("curl") {
            missing.push(CURL);
        }
        if opts.sha256.is_none() && !runs("gpgv") {
            missing.push(GPGV);
        }
    }
    if !runs("cc") {
        missing.push(CC);
    } else {
        for (code, pre) in headers(flags) {
            let ok = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "printf '%s\\n' '{code}' | cc -E -x c - >/dev/null 2>&1"
                ))
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                missing.push(pre);
            }
        }
    }
    if !has_libclang() {
        missing.push(LIBCLANG);
    }
    if missing.is_empty() {
        return Ok(());
    }
    let what: Vec<&str> = missing.iter().map(|p| p.what).collect();
    let apt = format!(
        "apt-get install {}",
        missing.iter().map(|p| p.apt).collect::<Vec<_>>().join(" ")
    );
    let dnf = format!(
        "dnf install {}",
        missing.iter().map(|p| p.dnf).collect::<Vec<_>>().join(" ")
    );
    let line = if Path::new("/usr/bin/apt-get").exists() {
        apt
    } else if Path::new("/usr/bin/dnf").exists() {
        dnf
    } else {
        format!("{apt} (or: {dnf})")
    };
    err!(
        "missing build prerequisites: {}; install them with: {line}",
        what.join(", ")
    )
}
