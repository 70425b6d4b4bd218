//! How large the shared zone must be for its slab pool to hand out the
//! counters: nginx-free arithmetic over the sizes the module reads from
//! nginx (`ngx_pagesize` and the slab structures), so that it holds on
//! every page size (4 KiB on x86-64, 16 KiB on Apple-silicon Linux, 64 KiB
//! on ppc64le and aarch64 kernels built with 64K pages).
//!
//! `ngx_slab_init` (src/core/ngx_slab.c) lays a zone out as: the pool
//! header, one page descriptor and one statistics record per slot size
//! (`pagesize_shift - min_shift` of them, `min_shift` being 3), one page
//! descriptor per page, then the pages themselves from the first page
//! boundary on. An allocation larger than half a page takes whole,
//! contiguous pages.

/// The sizes a slab pool's layout depends on, as nginx has them on this
/// machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlabLayout {
    /// `ngx_pagesize`.
    pub page: usize,
    /// `sizeof(ngx_slab_pool_t)`.
    pub pool_header: usize,
    /// `sizeof(ngx_slab_page_t)`.
    pub page_desc: usize,
    /// `sizeof(ngx_slab_stat_t)`.
    pub stat: usize,
}

/// `ngx_init_zone_pool`'s `min_shift`: the smallest slot is 8 bytes.
const MIN_SHIFT: u32 = 3;

impl SlabLayout {
    /// The slot sizes' bookkeeping: one page descriptor and one statistics
    /// record for each of 8 bytes up to half a page.
    fn slot_sizes(&self) -> usize {
        (self.page.trailing_zeros().saturating_sub(MIN_SHIFT)) as usize
    }

    /// Bytes from the zone's start to the first page descriptor.
    fn header(&self) -> usize {
        self.pool_header + self.slot_sizes() * (self.page_desc + self.stat)
    }

    /// The whole pages one allocation of `payload` bytes takes: contiguous
    /// pages above half a page, else (a slot within) one page.
    pub fn pages_for(&self, payload: usize) -> usize {
        if payload > self.page / 2 {
            payload.div_ceil(self.page)
        } else {
            1
        }
    }

    /// The smallest zone, a whole number of pages, whose slab pool holds
    /// one allocation of `payload` bytes: the header and page descriptors,
    /// rounded up to the first page boundary, then the pages.
    pub fn zone_size(&self, payload: usize) -> usize {
        let pages = self.pages_for(payload);
        (self.header() + pages * self.page_desc).next_multiple_of(self.page) + pages * self.page
    }

    /// The pages `ngx_slab_init` makes available in a zone of `zone` bytes
    /// (the zone starts on a page boundary, as `mmap` places it), step by
    /// step as it computes them.
    pub fn usable_pages(&self, zone: usize) -> usize {
        let p = self.header();
        let Some(rest) = zone.checked_sub(p) else {
            return 0;
        };
        let mut pages = rest / (self.page + self.page_desc);
        let start = (p + pages * self.page_desc).next_multiple_of(self.page);
        let fit = zone.saturating_sub(start) / self.page;
        if pages > fit {
            pages = fit;
        }
        pages
    }

    /// Whether a zone of `zone` bytes holds one allocation of `payload`.
    pub fn holds(&self, zone: usize, payload: usize) -> bool {
        self.usable_pages(zone) >= self.pages_for(payload)
    }
}

/// The key an upstream's counters are found by: its whole name without
/// regard to ASCII case, as `ngx_http_upstream_add` and
/// `ngx_stream_upstream_add` compare names (`ngx_strncasecmp` over the
/// whole length), so two names have the same key exactly when nginx takes
/// them for the same upstream.
pub fn name_key(name: &[u8]) -> Vec<u8> {
    name.to_ascii_lowercase()
}

/// Whether the counters of an upstream last configured by configuration
/// `last` can be freed while configuration `new` is being set up, given the
/// oldest configuration with a worker still running (`oldest_live`, `None`
/// when no worker is known).
///
/// A worker of configuration `w` counts only into upstreams that `w` had,
/// so none counts into them once every live worker is newer than `last`.
/// The two configurations before `new` are kept whatever the workers say: a
/// worker forked for one of them may not have recorded itself yet.
pub fn reclaimable(last: u64, new: u64, oldest_live: Option<u64>) -> bool {
    let keep_from = new.saturating_sub(2);
    last < oldest_live.map_or(keep_from, |o| o.min(keep_from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_in_full_and_without_case() {
        let same = |a: &[u8], b: &[u8]| name_key(a) == name_key(b);
        assert!(same(b"Backend", b"backEND"));
        assert!(!same(b"be", b"be2"));
        let long_a = [b"x".repeat(300), b"a".to_vec()].concat();
        let long_b = [b"x".repeat(300), b"b".to_vec()].concat();
        assert!(!same(&long_a, &long_b));
        // Only ASCII folds, as ngx_strncasecmp folds.
        assert!(!same("É".as_bytes(), "é".as_bytes()));
    }

    #[test]
    fn counters_are_freed_once_no_worker_can_count_into_them() {
        // Reload to 10: the two before it (8, 9) are kept regardless.
        assert!(!reclaimable(9, 10, None));
        assert!(!reclaimable(8, 10, None));
        assert!(reclaimable(7, 10, None));
        assert!(reclaimable(7, 10, Some(9)));
        // A worker of 5 still drains connections: 5 and later are kept.
        assert!(!reclaimable(5, 10, Some(5)));
        assert!(reclaimable(4, 10, Some(5)));
        // The first configurations.
        assert!(!reclaimable(0, 1, None));
        assert!(!reclaimable(0, 2, None));
        assert!(reclaimable(0, 3, None));
    }

    /// The sizes of nginx's slab structures on a 64-bit target:
    /// `ngx_slab_page_t` is three words, `ngx_slab_stat_t` four, and the
    /// pool header (a mutex, a lock, the free list and pointers) 200 bytes
    /// in 1.28 (the test varies it, since only the module reads it).
    fn layout(page: usize, pool_header: usize) -> SlabLayout {
        SlabLayout {
            page,
            pool_header,
            page_desc: 24,
            stat: 32,
        }
    }

    /// The counters of the fixed 512-slot table.
    const PAYLOAD: usize = 167_952;

    #[test]
    fn the_zone_holds_the_counters_on_4_16_and_64_kib_pages() {
        for page in [4096, 16384, 65536] {
            for header in [128, 200, 512] {
                let l = layout(page, header);
                let size = l.zone_size(PAYLOAD);
                assert_eq!(size % page, 0, "{l:?}: {size}");
                assert!(l.holds(size, PAYLOAD), "{l:?}: {size} too small");
                // And no page more than needed: one page less does not hold.
                assert!(
                    !l.holds(size - page, PAYLOAD),
                    "{l:?}: {size} is larger than needed"
                );
            }
        }
    }

    /// The sizes docs/metrics.md gives.
    #[test]
    fn the_documented_sizes() {
        assert_eq!(layout(4096, 200).zone_size(PAYLOAD), 43 * 4096);
        assert_eq!(layout(16384, 200).zone_size(PAYLOAD), 12 * 16384);
        assert_eq!(layout(65536, 200).zone_size(PAYLOAD), 4 * 65536);
    }

    #[test]
    fn pages_by_page_size() {
        // 167,952 bytes: 42 pages of 4 KiB, 11 of 16 KiB, 3 of 64 KiB.
        assert_eq!(layout(4096, 200).pages_for(PAYLOAD), 42);
        assert_eq!(layout(16384, 200).pages_for(PAYLOAD), 11);
        assert_eq!(layout(65536, 200).pages_for(PAYLOAD), 3);
        // Up to half a page is a slot within one page.
        assert_eq!(layout(4096, 200).pages_for(2048), 1);
        assert_eq!(layout(4096, 200).pages_for(2049), 1);
        assert_eq!(layout(4096, 200).pages_for(4097), 2);
    }

    /// What the issue found: the old size (payload + 64 KiB) leaves two
    /// pages on 64 KiB pages where the counters need three, and is enough
    /// on 4 KiB pages.
    #[test]
    fn the_old_size_fails_on_64_kib_pages() {
        let old = PAYLOAD + 64 * 1024;
        assert_eq!(layout(65536, 200).usable_pages(old), 2);
        assert!(!layout(65536, 200).holds(old, PAYLOAD));
        assert!(layout(4096, 200).holds(old, PAYLOAD));
    }

    #[test]
    fn usable_pages_follows_ngx_slab_init() {
        let l = layout(4096, 200);
        // header 200 + 9 * 56 = 704; (8192 - 704) / 4120 = 1 page, the
        // pages start at 4096: one page fits.
        assert_eq!(l.usable_pages(8192), 1);
        // Too small for even the header.
        assert_eq!(l.usable_pages(512), 0);
        // 64 pages' descriptors (1,536 B) still fit before the first
        // boundary, so 65 pages of zone leave 64.
        assert_eq!(l.usable_pages(65 * 4096), 64);
    }
}
