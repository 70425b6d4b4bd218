//! The source order's unit tests: the origin chosen, mirrors and
//! codebases, a mirrored tarball vouched for, the crate releases, and
//! `nginx.h` read.

use std::fs;

use super::*;

#[test]
fn the_origin_follows_the_documented_order() {
    let none = Options::default();
    let user = Options {
        user: Some("/src/nginx".into()),
        ..Options::default()
    };
    assert_eq!(
        origin_with("1.30.4", &user, &[]),
        Origin::User("/src/nginx".into())
    );
    assert_eq!(
        origin_with("1.28.3", &none, &[]),
        Origin::Crate("1.28.5+1.28.3".into())
    );
    match origin_with("1.29.0", &none, &[]) {
        Origin::Download(url) => assert!(url.ends_with("/nginx-1.29.0.tar.gz"), "{url}"),
        o => panic!("1.29.0 has no crate and no mirror: {o:?}"),
    }
    // A mirror holding the tarball comes before the crate and a
    // download; one without it changes nothing.
    let m = std::env::temp_dir().join(format!("xtask-mirror-{}", std::process::id()));
    fs::create_dir_all(&m).unwrap();
    fs::write(m.join("nginx-1.28.3.tar.gz"), b"").unwrap();
    assert_eq!(
        origin_with("1.28.3", &none, std::slice::from_ref(&m)),
        Origin::Mirror(m.join("nginx-1.28.3.tar.gz"))
    );
    assert!(matches!(
        origin_with("1.29.0", &none, std::slice::from_ref(&m)),
        Origin::Download(_)
    ));
    let _ = fs::remove_dir_all(&m);
}

/// Several mirrors are searched in order, and a codebase that is no
/// release is found by its repository archive's name; with no mirror
/// holding it, it is refused with the way to name its source, before
/// anything is downloaded.
#[test]
fn codebases_come_from_a_mirror_or_the_operator() {
    let base = std::env::temp_dir().join(format!("xtask-mirrors-{}", std::process::id()));
    let (nginx, forks) = (base.join("nginx"), base.join("forks"));
    for (dir, file) in [
        (&nginx, "nginx-master-3f6f782.tar.gz"),
        (&nginx, "nginx-1.31.4.tar.gz"),
        (&forks, "tengine-3.2.0-fcebbd1.tar.gz"),
        (&forks, "tengine-3.1.0-aaaaaaa.tar.gz"),
        (&forks, "tengine-3.1.0-bbbbbbb.tar.gz"),
    ] {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join(file), b"").unwrap();
    }
    let none = Options::default();
    let both = [nginx.clone(), forks.clone()];
    assert_eq!(
        origin_with("master-3f6f782", &none, &both),
        Origin::Mirror(nginx.join("nginx-master-3f6f782.tar.gz"))
    );
    assert_eq!(
        origin_with("tengine-3.2.0", &none, &both),
        Origin::Mirror(forks.join("tengine-3.2.0-fcebbd1.tar.gz"))
    );
    // Two archives of one name: which is meant is not guessed.
    assert!(matches!(
        origin_with("tengine-3.1.0", &none, &both),
        Origin::Download(_)
    ));
    // `tengine-3.2` is no prefix of `tengine-3.2.0-...`'s name.
    assert!(mirrored(&forks, "tengine-3.2").is_none());
    let err = obtain("tengine-3.1.0", &none).err().unwrap().to_string();
    assert!(
        err.contains("not an nginx.org release") && err.contains("--nginx-source"),
        "{err}"
    );
    assert!(is_codebase("master-3f6f782") && is_codebase("tengine-3.2.0"));
    assert!(is_codebase("angie-1.12.1") && !is_codebase("angie-1.12"));
    assert!(!is_codebase("master-xyz1234") && !is_codebase("tengine-3.2"));
    assert!(!is_codebase("master-3f6f") && !is_release("master-3f6f782"));
    let _ = fs::remove_dir_all(&base);
}

/// A mirrored tarball is refused when its SHA256SUMS entry does not
/// match or when neither an entry nor a signature vouches for it.
#[test]
fn a_mirrored_tarball_must_be_vouched_for() {
    let m = std::env::temp_dir().join(format!("xtask-mirror-chk-{}", std::process::id()));
    fs::create_dir_all(&m).unwrap();
    let t = m.join("nginx-1.30.4.tar.gz");
    fs::write(&t, b"tarball").unwrap();
    let opts = Options::default();
    let err = check_mirrored(&t, &opts).unwrap_err().to_string();
    assert!(
        err.contains("no .asc signature") && err.contains("refusing"),
        "{err}"
    );
    let good = sha256(&t).unwrap();
    fs::write(
        m.join("SHA256SUMS"),
        format!("{good}  nginx-1.30.4.tar.gz\n"),
    )
    .unwrap();
    assert_eq!(check_mirrored(&t, &opts).unwrap(), good);
    fs::write(&t, b"tarball, changed").unwrap();
    let err = check_mirrored(&t, &opts).unwrap_err().to_string();
    assert!(
        err.contains("but") && err.contains("refusing to use it"),
        "{err}"
    );
    let wrong = Options {
        sha256: Some("0".repeat(64)),
        ..Options::default()
    };
    let err = given_sha256(&t, &good, &wrong).unwrap_err().to_string();
    assert!(err.contains("given with --sha256"), "{err}");
    let _ = fs::remove_dir_all(&m);
}

#[test]
fn every_crate_release_is_newest_for_its_nginx() {
    for (nginx, krate) in CRATES {
        assert_eq!(krate.split('+').nth(1), Some(*nginx), "{krate}");
    }
}

#[test]
fn the_version_is_read_from_nginx_h() {
    let dir = std::env::temp_dir().join(format!("xtask-ver-{}", std::process::id()));
    fs::create_dir_all(dir.join("src/core")).unwrap();
    fs::write(
        dir.join("src/core/nginx.h"),
        "#define nginx_version      1031004\n#define NGINX_VERSION      \"1.31.4\"\n",
    )
    .unwrap();
    assert_eq!(tree_version(&dir).unwrap(), "1.31.4");
    assert_eq!(tree_name(&dir).unwrap(), "1.31.4");
    fs::write(
        dir.join("src/core/nginx.h"),
        "#define NGINX_VERSION      \"1.31.3\"\n#define TENGINE_VERSION    \"3.2.0\"\n",
    )
    .unwrap();
    assert_eq!(tree_version(&dir).unwrap(), "1.31.3");
    assert_eq!(tree_name(&dir).unwrap(), "tengine-3.2.0");
    fs::write(
        dir.join("src/core/nginx.h"),
        "#define NGINX_VERSION      \"1.31.2\"\n",
    )
    .unwrap();
    fs::write(
        dir.join("src/core/angie.h"),
        "#define ANGIE_VERSION      \"1.12.1\"\n#define ANGIE_VER  \"Angie/\" ANGIE_VERSION\n",
    )
    .unwrap();
    assert_eq!(tree_name(&dir).unwrap(), "angie-1.12.1");
    let _ = fs::remove_dir_all(&dir);
    assert!(tree_version(&dir)
        .unwrap_err()
        .to_string()
        .contains("not an nginx source tree"));
}

/// A port on 127.0.0.1 that was bound and let go: nothing listens there.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// With nginx.org out of reach (here a closed loopback port) and no
/// mirror, the download's failure is said once and names the other ways
/// to give the source: `--nginx-source`, the mirror, another URL.
#[test]
fn a_failed_download_names_the_other_ways_once() {
    let dir = std::env::temp_dir().join(format!("xtask-nonet-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let url = format!(
        "http://127.0.0.1:{}/download/nginx-1.29.9.tar.gz",
        closed_port()
    );
    let err = download::download(&url, &dir.join("nginx-1.29.9.tar.gz"))
        .unwrap_err()
        .to_string();
    for remedy in [
        "--nginx-source PATH",
        MIRROR_ENV,
        URL_ENV,
        "nginx-1.29.9.tar.gz",
    ] {
        assert!(err.contains(remedy), "{remedy}: {err}");
    }
    assert_eq!(err.matches("curl: (7)").count(), 1, "{err}");
    assert!(!dir.join("nginx-1.29.9.tar.gz").exists());
    let _ = fs::remove_dir_all(&dir);
}

/// A server that fails in a way curl retries (503, as an overloaded
/// nginx.org or a proxy answers): curl says its error at each of its
/// three attempts; the install says it once.
#[test]
fn curl_retrying_is_said_once() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let dir = std::env::temp_dir().join(format!("xtask-503-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let url = format!("http://127.0.0.1:{port}/download/nginx-1.29.9.tar.gz.asc");
    let err = download::download(&url, &dir.join("sig"))
        .unwrap_err()
        .to_string();
    assert_eq!(err.matches("503").count(), 1, "{err}");
    assert!(err.contains("--nginx-source"), "{err}");
    // The tarball's name, not its signature's, is what to look for.
    assert!(err.contains("holding nginx-1.29.9.tar.gz,"), "{err}");
    let _ = fs::remove_dir_all(&dir);
}
