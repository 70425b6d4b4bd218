//! The layout probe: a C program, built with the tree's compiler and flags,
//! that prints each named structure's size and alignment (`S`), each plain
//! field's offset (`F`) and each bitfield's first bit and width (`B`), as
//! the C compiler lays them out.

use std::fmt::Write as _;

use super::c_types::Member;
use super::Structure;

/// The probe's C source: `headers`, then a `main` printing one line per
/// structure, field and bitfield of `structs` that bindgen generated too.
pub(super) fn source(headers: &str, structs: &[Structure]) -> String {
    // The probe: sizes, alignments, offsets and bit positions as the C
    // compiler lays them out.
    let mut probe = headers.to_owned();
    probe.push_str(
        "#include <stdio.h>\n#include <stddef.h>\n#include <string.h>\n\
         static void bit(const char *s, const char *f, const unsigned char *p, size_t n) {\n\
         size_t i, first = (size_t) -1, width = 0;\n\
         for (i = 0; i < n * 8; i++) {\n\
         /* Numbered as bindgen's bitfield unit numbers them: from the least\n\
            significant bit of each byte, or the most on a big-endian target. */\n\
         #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__\n\
         unsigned bit = 7 - i % 8;\n\
         #else\n\
         unsigned bit = i % 8;\n\
         #endif\n\
         if (p[i / 8] & (1u << bit)) { if (first == (size_t) -1) first = i; width++; } }\n\
         printf(\"B %s %s %zu %zu\\n\", s, f, first, width);\n}\n\
         int main(void) {\n",
    );
    for (name, c_type, r, body) in structs {
        let _ = writeln!(
            probe,
            "printf(\"S {name} %zu %zu\\n\", sizeof({c_type}), (size_t) __alignof__({c_type}));"
        );
        // Only members bindgen generated too: what bindgen (which parsed
        // the headers with clang) does not know is no member this simple
        // reading can be sure of, and would only break the probe.
        for m in body {
            match m {
                Member::Embeds(_) => {}
                Member::Plain(f) if r.field(f).is_none() => {}
                Member::Bits(f) if !r.bitfields.contains_key(f) => {}
                Member::Plain(f) => {
                    let _ = writeln!(
                        probe,
                        "printf(\"F {name} {f} %zu\\n\", offsetof({c_type}, {f}));"
                    );
                }
                Member::Bits(f) => {
                    let _ = writeln!(
                        probe,
                        "{{ static {c_type} v; memset(&v, 0, sizeof(v)); v.{f} = -1; \
                         bit(\"{name}\", \"{f}\", (const unsigned char *) &v, sizeof(v)); }}"
                    );
                }
            }
        }
    }
    probe.push_str("return 0;\n}\n");
    probe
}
