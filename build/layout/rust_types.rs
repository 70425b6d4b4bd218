//! nginx's structures as bindgen generated them, read from nginx-sys's
//! `bindings.rs`: each structure's fields and, for each bitfield accessor,
//! the unit, bit and width it reads.

use std::collections::{BTreeMap, BTreeSet};

use super::c_types::is_ident;

/// A structure as bindgen generated it: its field names and, for each
/// bitfield accessor, its unit, bit offset in the unit and width.
pub(super) struct RustStruct {
    fields: BTreeSet<String>,
    pub(super) bitfields: BTreeMap<String, (String, u64, u64)>,
}

impl RustStruct {
    /// bindgen's name of the C field `f` (Rust keywords take a `_`).
    pub(super) fn field(&self, f: &str) -> Option<String> {
        [f.to_owned(), format!("{f}_")]
            .into_iter()
            .find(|n| self.fields.contains(n))
    }
}

pub(super) struct RustTypes {
    pub(super) structs: BTreeMap<String, RustStruct>,
    aliases: BTreeMap<String, String>,
}

impl RustTypes {
    pub(super) fn parse(text: &str) -> RustTypes {
        let mut structs: BTreeMap<String, RustStruct> = BTreeMap::new();
        let mut aliases = BTreeMap::new();
        let mut current: Option<(String, bool)> = None;
        // The getter whose body is being read: `pub fn NAME(&self) -> T {`
        // on one line, `self._bitfield_N.get(B usize, W u8)` on the next.
        let mut getter: Option<String> = None;
        for line in text.lines() {
            let l = line.trim();
            if let Some(rest) = l.strip_prefix("pub struct ") {
                if let Some(name) = rest.strip_suffix(" {") {
                    structs.entry(name.to_owned()).or_insert(RustStruct {
                        fields: BTreeSet::new(),
                        bitfields: BTreeMap::new(),
                    });
                    current = Some((name.to_owned(), true));
                }
                continue;
            }
            if let Some(rest) = l.strip_prefix("impl ") {
                current = rest
                    .strip_suffix(" {")
                    .filter(|n| is_ident(n))
                    .map(|n| (n.to_owned(), false));
                continue;
            }
            if let Some(rest) = l.strip_prefix("pub type ") {
                if let Some((name, target)) = rest.split_once(" = ") {
                    aliases.insert(name.to_owned(), target.trim_end_matches(';').to_owned());
                }
                continue;
            }
            if line.starts_with('}') {
                current = None;
                continue;
            }
            let Some((name, in_struct)) = &current else {
                continue;
            };
            let Some(s) = structs.get_mut(name) else {
                continue;
            };
            if *in_struct {
                if let Some((field, _)) = l.strip_prefix("pub ").and_then(|r| r.split_once(':')) {
                    s.fields.insert(field.to_owned());
                }
                continue;
            }
            if let Some(rest) = l.strip_prefix("pub fn ") {
                getter = rest
                    .split_once("(&self)")
                    .map(|(n, _)| n.to_owned())
                    .filter(|n| !n.ends_with("_raw"));
                continue;
            }
            if let (Some(g), Some(at)) = (&getter, l.find("self._bitfield_")) {
                if let Some(acc) = unit_get(&l[at + 5..]) {
                    s.bitfields.insert(g.clone(), acc);
                }
                getter = None;
            }
        }
        RustTypes { structs, aliases }
    }

    /// bindgen's structure for the name the module spells (a typedef is an
    /// alias of the tag's structure).
    pub(super) fn resolve(&self, name: &str) -> Option<(&str, &RustStruct)> {
        let mut target = name;
        for _ in 0..8 {
            if let Some((k, s)) = self.structs.get_key_value(target) {
                return Some((k, s));
            }
            target = self.aliases.get(target)?;
        }
        None
    }
}

/// `_bitfield_N.get(B usize, W u8)...`: the unit, the bit in it, the width.
fn unit_get(l: &str) -> Option<(String, u64, u64)> {
    let (unit, rest) = l.split_once(".get(")?;
    let (bit, rest) = rest.split_once("usize,")?;
    let (width, _) = rest.trim_start().split_once("u8")?;
    Some((
        unit.to_owned(),
        bit.trim().parse().ok()?,
        width.trim().parse().ok()?,
    ))
}
