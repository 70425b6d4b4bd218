//! The scripted race on a [`Lab`] (a held first attempt, a DNS flip, the
//! close that makes nginx retry), the same failure without a flip, and a
//! binary upgrade under load; [`Race`] is what one race produced.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use super::spec::NAME;
use super::Lab;
use crate::actors::backend::{Backend, ADDR_A, ADDR_B};
use crate::actors::dns::Answer;
use crate::actors::load::{open_loop, Client, Response, Sent};
use crate::memcheck::patience;
use crate::scoring::accesslog::Entry;
use reqwest::Method;
impl Lab {
    /// The deterministic race, once:
    ///
    /// 1. a request on a warm keepalive connection to the current address is
    ///    held by the backend;
    /// 2. the DNS answer flips to the other address, and the test waits until
    ///    nginx has asked, been told, and applied it (new requests reach the
    ///    new address);
    /// 3. the backend closes the held connection without answering, so nginx
    ///    retries (a failed cached connection gets its try back) and selects
    ///    again, now under a changed peer-list generation.
    pub async fn race_once(&mut self, i: usize) -> Race {
        self.race_once_then(i, |_| {}).await
    }

    /// [`Lab::race_once`], calling `before_release` on the backend just
    /// before the held connection is closed (to fail the retry too, say).
    pub async fn race_once_then(
        &mut self,
        i: usize,
        before_release: impl FnOnce(&Backend),
    ) -> Race {
        let flip = self.flip_name();
        self.race(i, flip, Method::GET, before_release).await
    }

    /// [`Lab::race_once`] with a request of `method` (a POST carries a
    /// small body): what nginx would not resend, the fix must not either.
    pub async fn race_method(&mut self, i: usize, method: Method) -> Race {
        let flip = self.flip_name();
        self.race(i, flip, method, |_| {}).await
    }

    /// [`Lab::race_once`], but the re-resolve answers NXDOMAIN: the list is
    /// emptied (its generation moves) while the first attempt is held, so
    /// the retry's fresh snapshot has no peer. Needs the module's status
    /// endpoint, which says when nginx applied the empty list. `Race::new`
    /// is `0.0.0.0`.
    pub async fn race_to_nxdomain(&mut self, i: usize) -> Race {
        let flip = |_| Flip {
            records: vec![(NAME.to_string(), Answer::NxDomain)],
            new: Ipv4Addr::UNSPECIFIED,
        };
        self.race(i, flip, Method::GET, |_| {}).await
    }

    /// The GSLB's flip: [`NAME`]'s one A record to the other address.
    fn flip_name(&self) -> impl FnOnce(Ipv4Addr) -> Flip {
        let new = if self.current == ADDR_A {
            ADDR_B
        } else {
            ADDR_A
        };
        move |_| Flip {
            records: vec![(NAME.to_string(), Answer::A(vec![new]))],
            new,
        }
    }

    /// [`Lab::race_once`] with another change of the DNS: `flip`, given
    /// the address the backend holds the first attempt at, says which
    /// records change and where new requests go once nginx applied them
    /// (SRV targets and priorities, AAAA records, a set of addresses).
    pub async fn race_flip(&mut self, i: usize, flip: impl FnOnce(Ipv4Addr) -> Flip) -> Race {
        self.race(i, flip, Method::GET, |_| {}).await
    }

    async fn race(
        &mut self,
        i: usize,
        flip: impl FnOnce(Ipv4Addr) -> Flip,
        method: Method,
        before_release: impl FnOnce(&Backend),
    ) -> Race {
        let old = self.current;
        let hold = if self.keepalive {
            // A cached connection to `old`: its next request is a reused one.
            self.wait_proxying_to(old, &format!("/warm/{i}")).await;
            self.backend.arm_hold()
        } else {
            self.backend.arm_hold_any()
        };
        let path = format!("/race/{i}");
        let client = self.client.clone();
        let request = {
            let path = path.clone();
            let body = (method == Method::POST).then(|| b"raced=1".to_vec());
            tokio::spawn(async move { client.request(method, &path, body).await })
        };
        let held = hold
            .caught(patience(Duration::from_secs(10)))
            .await
            .unwrap_or_else(|e| panic!("race {i}: {e}"));
        if self.keepalive {
            assert_eq!(held.addr, old, "race {i}: held on the wrong address");
        }
        assert_eq!(held.path, path);
        let first_hop = held.addr;
        let Flip { records, new } = flip(first_hop);

        // With the module, its status shows when nginx applied the answer:
        // the list's generation moves. (A probe answered by `new` can come
        // from a static peer at the same address before that.)
        let generation = self.generation().await;
        let since = Instant::now();
        for (name, answer) in &records {
            self.dns.set(name, answer.clone());
        }
        for (name, answer) in &records {
            self.dns
                .wait_answered(name, answer, since, patience(Duration::from_secs(10)))
                .await
                .unwrap_or_else(|e| panic!("race {i}: {e}"));
        }
        if let Some(before) = generation {
            self.wait_generation_past(before).await;
        }
        if new.is_unspecified() {
            self.wait_peers(0).await;
        } else {
            self.wait_proxying_to(new, &format!("/probe/{i}")).await;
            self.current = new;
        }

        before_release(&self.backend);
        let released = Instant::now();
        held.close();
        let response = request.await.expect("client task");
        let after_release = released.elapsed();
        let entry = self.access_entry(&path).await;
        Race {
            old,
            new,
            first_hop,
            after_release,
            path,
            response,
            entry,
        }
    }

    /// The same failure without a DNS flip: a request on a reused keepalive
    /// connection is closed by the backend and nginx retries it under an
    /// unchanged generation (the ordinary cached-connection retry).
    /// Returns the time from the close to the client's response.
    pub async fn retry_without_flip(&mut self, i: usize) -> (Response, Duration) {
        self.retry_without_flip_then(i, |_| {}).await
    }

    /// [`Lab::retry_without_flip`], running `before_release` just before
    /// the backend closes the held connection (as [`Lab::race_once_then`]).
    pub async fn retry_without_flip_then(
        &mut self,
        i: usize,
        before_release: impl FnOnce(&Backend),
    ) -> (Response, Duration) {
        self.wait_proxying_to(self.current, &format!("/warm-plain/{i}"))
            .await;
        let hold = self.backend.arm_hold();
        let client = self.client.clone();
        let path = format!("/plain/{i}");
        let request = tokio::spawn(async move { client.get(&path).await });
        let held = hold
            .caught(patience(Duration::from_secs(10)))
            .await
            .unwrap_or_else(|e| panic!("retry {i}: {e}"));
        before_release(&self.backend);
        let released = Instant::now();
        held.close();
        let response = request.await.expect("client task");
        (response, released.elapsed())
    }

    /// A binary upgrade (USR2, then QUIT to the old master; nginx must run
    /// as a daemon, `Spec::daemon`) under a steady load: 100 GETs a second
    /// of `/steady/N`, each on a new connection (a pooled one that the old
    /// worker closes while idle would fail on the client's side of the
    /// keepalive race), for 6 s, the upgrade 1 s in. What the load got.
    pub async fn upgrade_under_load(&mut self) -> Vec<Sent> {
        // Drop our connections to the old worker first, so it can exit (as
        // `reconfigure` does): a pool may hold one it opened and never sent
        // a request on, which nginx's graceful exit waits for.
        self.reload_clients();
        let client = Client::without_keepalive(self.nginx.url(""));
        let load = tokio::spawn(async move {
            open_loop(&client, 100.0, Duration::from_secs(6), |i| {
                (reqwest::Method::GET, format!("/steady/{i}"), None)
            })
            .await
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.nginx.binary_upgrade().await;
        load.await.expect("the load")
    }
}

/// A change of the DNS raced against a held first attempt.
#[derive(Clone, Debug)]
pub struct Flip {
    /// The records set, each `(name, answer)`; the race waits until nginx
    /// was told each.
    pub records: Vec<(String, Answer)>,
    /// An address the list did not give new requests before the change
    /// and does after: the race waits until a probe is answered there.
    /// `0.0.0.0`: none, the list is emptied (the race waits until the
    /// module's peers gauge reads 0).
    pub new: Ipv4Addr,
}

/// What one race produced.
#[derive(Debug)]
pub struct Race {
    pub old: Ipv4Addr,
    pub new: Ipv4Addr,
    /// Where the held (failed) first attempt went.
    pub first_hop: Ipv4Addr,
    /// From closing the held connection to the client's response: the cost
    /// of nginx's retry (and of a rescue, when there was one).
    pub after_release: Duration,
    pub path: String,
    pub response: Response,
    pub entry: Entry,
}
