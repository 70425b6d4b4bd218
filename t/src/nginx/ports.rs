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
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Mutex;

/// A free TCP port on 127.0.0.1, held for nginx (see the module's doc),
/// never one this process handed out before.
pub fn free_port() -> u16 {
    static HELD: Mutex<(BTreeSet<u16>, Vec<OwnedFd>)> = Mutex::new((BTreeSet::new(), Vec::new()));
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let (port, fd) = bound(0, true).unwrap_or_else(|e| panic!("holding a port: {e}"));
        if held.0.insert(port) {
            held.1.push(fd);
            return port;
        }
    }
}

/// A TCP socket bound to 127.0.0.1:`port` (0: the kernel's choice), with
/// `SO_REUSEADDR` when `reuse`, not listening; and its port.
fn bound(port: u16, reuse: bool) -> std::io::Result<(u16, OwnedFd)> {
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
    addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
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
        let taken = bound(port, false).expect_err("a held port is not free");
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
}
