# Make rules of this module, sourced by nginx's auto/make (see config):
# `make modules` (and `make`, `make install`) run cargo against this tree's
# objs and copy the shared object to objs/, as nginx does with its own.

ngx_gr_name=ngx_http_upstream_generation_retry_module
ngx_gr_so=$NGX_OBJS/$ngx_gr_name$ngx_modext

# Absolute paths, as the build script of nginx-sys wants them.
ngx_gr_src=`pwd`
ngx_gr_objs=`cd "$NGX_OBJS" && pwd`
ngx_gr_dir=`cd "$ngx_addon_dir" && pwd`
ngx_gr_target=$ngx_gr_objs/$ngx_gr_name

# cargo runs in the module's directory (below): a relative NGX_CARGO is
# relative to this tree.
case "$NGX_CARGO" in
    [!/]*/*) ngx_gr_cargo_cmd=$ngx_gr_src/$NGX_CARGO ;;
    *)       ngx_gr_cargo_cmd=$NGX_CARGO ;;
esac

case "$NGX_PLATFORM" in
    Darwin:*) ngx_gr_cdylib=lib$ngx_gr_name.dylib ;;
    *)        ngx_gr_cdylib=lib$ngx_gr_name.so ;;
esac

# As auto/install resolves it (it runs after this file).
case ".$NGX_MODULES_PATH" in
    ./*) ngx_gr_modules=$NGX_MODULES_PATH ;;
    *)   ngx_gr_modules=$NGX_PREFIX/$NGX_MODULES_PATH ;;
esac

cat << END                                                >> $NGX_MAKEFILE

modules:	$ngx_gr_so

# cargo knows when the module's sources changed: always ask it. It runs in
# the module's directory, as cargo reads .cargo/config.toml from the current
# directory up, not from the manifest's: a source release (cargo xtask dist)
# has one there that builds from its vendor/ directory, offline.
.PHONY:	$ngx_gr_so ${ngx_gr_name}_install

$ngx_gr_so:
	cd "$ngx_gr_dir" \\
	&& NGINX_BUILD_DIR="$ngx_gr_objs" NGINX_SOURCE_DIR="$ngx_gr_src" \\
	$ngx_gr_cargo_cmd build --release --locked \\
		--manifest-path "$ngx_gr_dir/Cargo.toml" \\
		--package $ngx_gr_name \\
		--no-default-features --features export-modules \\
		--target-dir "$ngx_gr_target"
	cp "$ngx_gr_target/release/$ngx_gr_cdylib" $ngx_gr_so

install:	${ngx_gr_name}_install

${ngx_gr_name}_install:	$ngx_gr_so
	test -d '\$(DESTDIR)$ngx_gr_modules' \\
		|| mkdir -p '\$(DESTDIR)$ngx_gr_modules'
	test ! -f '\$(DESTDIR)$ngx_gr_modules/$ngx_gr_name$ngx_modext' \\
		|| mv '\$(DESTDIR)$ngx_gr_modules/$ngx_gr_name$ngx_modext' \\
			'\$(DESTDIR)$ngx_gr_modules/$ngx_gr_name$ngx_modext.old'
	cp $ngx_gr_so '\$(DESTDIR)$ngx_gr_modules/$ngx_gr_name$ngx_modext'
END
