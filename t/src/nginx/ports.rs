//! The ports nginx listens on: free, and kept free for it. A port is held
//! for the whole test process by a socket bound with `SO_REUSEADDR` that
//! never listens. nginx, which sets `SO_REUSEADDR` on every listening
//! socket, binds and listens on it all the same (so do std's and tokio's
//! listeners); the kernel gives it to no one else meanwhile: not to
//! another process's `bind(:0)` (test binaries run side by side), nor as
//! the source port of a connection (it skips ports a socket is bound to).
//! A port bound and released at once was the kernel's to give again
//! before nginx took it.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Mutex;

/// A free TCP port on 127.0.0.1, held for nginx (see the module's doc),
/// never one this process handed out before.
pub fn free_port() -> u16 {
    hold(Ipv4Addr::LOCALHOST, true)
}

/// A free TCP port on `ip`, held as [`free_port`]'s are: for a listener
/// of the test's own (a black hole that opens and closes), which no other
/// process's can take while it is closed.
pub fn free_port_at(ip: Ipv4Addr) -> u16 {
    hold(ip, true)
}

/// A port on `ip` where nothing can listen, for the process's life: its
/// socket is bound without `SO_REUSEADDR`, so no listener of anyone's can
/// bind it, and a connect is refused. A dead peer that stays dead.
pub fn refusing_port(ip: Ipv4Addr) -> u16 {
    hold(ip, false)
}

/// The ports this process handed out, and the sockets that hold them.
struct Held {
    given: BTreeSet<(Ipv4Addr, u16)>,
    sockets: Vec<OwnedFd>,
}

fn hold(ip: Ipv4Addr, reuse: bool) -> u16 {
    static HELD: Mutex<Held> = Mutex::new(Held {
        given: BTreeSet::new(),
        sockets: Vec::new(),
    });
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let (port, fd) =
            bound(ip, 0, reuse).unwrap_or_else(|e| panic!("holding a port on {ip}: {e}"));
        if held.given.insert((ip, port)) {
            held.sockets.push(fd);
            return port;
        }
    }
}

/// A TCP socket bound to `ip`:`port` (0: the kernel's choice), with
/// `SO_REUSEADDR` when `reuse`, not listening; and its port.
fn bound(ip: Ipv4Addr, port: u16, reuse: bool) -> std::io::Result<(u16, OwnedFd)> {
    // SAFETY: socket(2) with constant arguments; the descriptor it returns
    // is owned by the OwnedFd at once, and closed by it.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    let one = libc::c_int::from(reuse);
    // SAFETY: `one` outlives the call, and its size is the length given.
    let r = unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            std::ptr::addr_of!(one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: sockaddr_in is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    addr.sin_family = libc::AF_INET as libc::sa_family_t;
    addr.sin_addr.s_addr = u32::from(ip).to_be();
    addr.sin_port = port.to_be();
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `addr` is a sockaddr_in of the length given, alive for both
    // calls; getsockname writes at most `len` bytes into it.
    let r = unsafe {
        let p = std::ptr::addr_of_mut!(addr).cast::<libc::sockaddr>();
        if libc::bind(raw, p, len) != 0 {
            -1
        } else {
            libc::getsockname(raw, p, &mut len)
        }
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((u16::from_be(addr.sin_port), fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    /// What the harness counts on: a listener takes the held port, and
    /// meanwhile no `bind(:0)` nor connection of anyone's is given it.
    #[test]
    fn a_held_port_is_nginxs_to_take_and_nobody_elses() {
        let port = free_port();
        // Held: a bind that does not share refuses it.
        let taken = bound(Ipv4Addr::LOCALHOST, port, false).expect_err("a held port is not free");
        assert_eq!(taken.kind(), std::io::ErrorKind::AddrInUse, "{taken}");
        for _ in 0..500 {
            let other = TcpListener::bind("127.0.0.1:0").unwrap();
            assert_ne!(other.local_addr().unwrap().port(), port);
        }
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("SO_REUSEADDR listener");
        let addr = listener.local_addr().unwrap();
        for _ in 0..500 {
            let c = TcpStream::connect(addr).unwrap();
            assert_ne!(c.local_addr().unwrap().port(), port);
            drop(listener.accept().unwrap());
        }
        // Not handed out twice by this process either.
        assert_ne!(free_port(), port);
    }

    /// A refusing port stays dead: a connect is refused and no listener,
    /// with or without `SO_REUSEADDR`, can take it.
    #[test]
    fn a_refusing_port_refuses_and_nobody_can_listen_there() {
        let ip = Ipv4Addr::new(127, 0, 0, 4);
        let port = refusing_port(ip);
        let refused = TcpStream::connect((ip, port)).expect_err("nothing listens");
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        let taken = TcpListener::bind((ip, port)).expect_err("std's listener sets SO_REUSEADDR");
        assert_eq!(taken.kind(), std::io::ErrorKind::AddrInUse, "{taken}");
    }
}
