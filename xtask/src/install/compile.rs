//! The module compiled for the operator's nginx: its source tree
//! configured with the binary's flags, the module built against it, and
//! proven to load into the binary.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::binary::Identity;
use super::place::Layout;
use super::prerequisites::check_prerequisites;
use super::Args;
use crate::build::module_against;
use crate::source;
use crate::tree::{nginx_tree, Make};
use crate::workspace::{target_dir, At, Result};

/// Modules whose `configure` checks need a library beyond OpenSSL, PCRE
/// and zlib; none of them changes a structure the module reads, so the
/// module's tree is configured without them.
const NEEDS_A_LIBRARY: &[&str] = &[
    "--with-http_xslt_module",
    "--with-http_image_filter_module",
    "--with-http_geoip_module",
    "--with-stream_geoip_module",
    "--with-http_perl_module",
    "--with-google_perftools_module",
    "--with-libatomic",
];

/// The configure flags of the module's tree: `--with-compat`, and every
/// value-less `--with-*`/`--without-*` of the binary (they decide the
/// structure layouts and whether the module has its stream part), less
/// the modules that need other libraries; a dynamic stream is configured
/// in, since only its headers matter.
pub fn tree_flags(id: &Identity) -> Vec<String> {
    let mut flags = vec!["--with-compat".to_string()];
    for a in &id.arguments {
        let a = match a.strip_suffix("=dynamic") {
            Some("--with-stream") => "--with-stream",
            Some(_) => continue,
            None => a.as_str(),
        };
        let plain = (a.starts_with("--with-") || a.starts_with("--without-")) && !a.contains('=');
        if plain && !NEEDS_A_LIBRARY.contains(&a) && !flags.iter().any(|f| f == a) {
            flags.push(a.to_string());
        }
    }
    flags
}

/// What a build for a binary made.
pub struct ModuleBuild {
    pub so: PathBuf,
    pub version: String,
}

/// The module for `id`: its source obtained and checked, a copy configured
/// with [`tree_flags`], the module compiled against it (both reused when
/// nothing that decides them changed). Nothing else is built.
pub(super) fn build_module(a: &Args, id: &Identity) -> Result<ModuleBuild> {
    let flags = tree_flags(id);
    let download = matches!(
        source::origin(&id.codebase, &a.source),
        source::Origin::Download(_)
    );
    check_prerequisites(&flags, download.then_some(&a.source))?;
    let src = source::obtain(&id.codebase, &a.source)?;
    eprintln!("xtask: nginx {} from {}", src.version, src.origin);
    let work = target_dir().join("install").join(&src.version);
    let (tree, _, stamp) = nginx_tree(
        &src.tree,
        &src.identity,
        &work.join("tree"),
        &flags,
        &[],
        Make::ConfigureOnly,
    )?;
    let so = module_against(&tree.join("objs"), &stamp, &work.join("module"))?;
    Ok(ModuleBuild {
        so,
        version: src.version,
    })
}

/// `BINARY -t` of a scratch configuration that loads `module` (after
/// the binary's own dynamic stream module, if it has one): the module
/// fits this binary, whatever its running configuration says.
pub(super) fn prove_loads(a: &Args, id: &Identity, layout: &Layout, module: &Path) -> Result {
    let dir = target_dir().join(format!("install-probe-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("logs")).at(dir.join("logs"))?;
    let mut conf = String::new();
    let stream_so = layout.modules.join("ngx_stream_module.so");
    if id.has("--with-stream=dynamic") && stream_so.is_file() {
        conf.push_str(&format!("load_module {};\n", stream_so.display()));
    }
    conf.push_str(&format!(
        "load_module {};\nerror_log stderr;\npid {}/nginx.pid;\nevents {{}}\n",
        module.display(),
        dir.display()
    ));
    let path = dir.join("nginx.conf");
    fs::write(&path, conf).at(&path)?;
    let out = Command::new(&a.binary)
        .arg("-e")
        .arg("stderr")
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&path)
        .arg("-t")
        .output()
        .at(&a.binary);
    let _ = fs::remove_dir_all(&dir);
    let out = out?;
    let said = String::from_utf8_lossy(&out.stderr);
    if out.status.success() && said.contains("test is successful") {
        return Ok(());
    }
    err!(
        "{} refuses the module built for it; nothing was installed:\n{said}",
        a.binary.display()
    )
}
