//! Which structures the layout gate checks: those the module's sources
//! spell, every one with a bitfield the module calls an accessor of, and,
//! to any depth, every structure embedded in one of them; each found in
//! both the headers and the bindings.

use std::collections::BTreeSet;

use super::c_types::{CTypes, Member};
use super::rust_types::RustTypes;
use super::Structure;

/// Fewer structures found in both the headers and the bindings than the
/// module names on any tree means the reading failed, not that the module
/// uses less (41 on every tree of the matrix).
const MIN_STRUCTS: usize = 30;

/// The structures to check, from the names the module spells (`named`)
/// and the accessors it calls (`called`); `Err` when too few are found.
pub(super) fn structures<'r>(
    c: &CTypes,
    rust: &'r RustTypes,
    mut named: BTreeSet<String>,
    called: &BTreeSet<String>,
) -> Result<Vec<Structure<'r>>, String> {
    // Also every structure with a bitfield of a name the module calls an
    // accessor of: the module reaches some (`ngx_buf_t`, TLS state) through
    // a wrapper or an inferred type, without spelling them.
    for (name, body) in &c.bodies {
        if body
            .iter()
            .any(|m| matches!(m, Member::Bits(f) if called.contains(f)))
        {
            named.insert(name.clone());
        }
    }
    // And, to any depth, every structure embedded in one of them (a
    // member that is a structure, as `headers_out` in the request).
    loop {
        let embedded: Vec<String> = named
            .iter()
            .filter_map(|n| c.resolve(n))
            .flat_map(|(_, body)| body.iter())
            .filter_map(|m| match m {
                Member::Embeds(t) if c.resolve(t).is_some() => Some(t.clone()),
                _ => None,
            })
            .filter(|t| !named.contains(t))
            .collect();
        if embedded.is_empty() {
            break;
        }
        named.extend(embedded);
    }
    // Structure: (name as checked, C expression of its type, Rust struct
    // whose fields and accessors bindgen generated, members); each Rust
    // structure once, under the first name met.
    let mut structs = Vec::new();
    let mut seen = BTreeSet::new();
    for name in &named {
        let Some((c_type, body)) = c.resolve(name) else {
            continue;
        };
        let Some((rust_name, rust_struct)) = rust.resolve(name) else {
            continue;
        };
        if seen.insert(rust_name.to_owned()) {
            structs.push((name.clone(), c_type, rust_struct, body.clone()));
        }
    }

    if structs.len() < MIN_STRUCTS {
        return Err(format!(
            "only {} of the module's structures found in both the headers and the \
             bindings ({}): the gate would check too little",
            structs.len(),
            structs
                .iter()
                .map(|s| s.0.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(structs)
}
