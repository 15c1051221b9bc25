//! sandboxd's Debian package (`sandboxd/packaging/deb/build-deb.sh`): built
//! from this checkout's binaries and read back with `dpkg-deb`, the tool
//! that installs it. Booting it on a machine is the engine's machine test.

use std::path::Path;
use std::process::Command;

/// `dpkg-deb ARGS`, which must succeed; its stdout.
fn dpkg_deb(args: &[&str]) -> String {
    let out = Command::new("dpkg-deb")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("dpkg-deb could not run ({e}): install Debian's dpkg-dev (`apt-get install dpkg-dev`)")
        });
    assert!(
        out.status.success(),
        "dpkg-deb {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn the_deb_installs_the_binaries_the_unit_and_the_maintainer_scripts() {
    let out = tempfile::tempdir().unwrap();
    let deb = test_support::sandboxd_deb(out.path());
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        deb.file_name().unwrap().to_str().unwrap(),
        format!("sandboxd_{version}_amd64.deb")
    );

    let deb_arg = deb.to_str().unwrap();
    let field = |name: &str| dpkg_deb(&["--field", deb_arg, name]);
    assert_eq!(field("Package").trim(), "sandboxd");
    assert_eq!(field("Version").trim(), version);
    assert_eq!(field("Architecture").trim(), "amd64");
    let depends = field("Depends");
    // systemd runs it and makes its user; libc6 is what dpkg-shlibdeps
    // found the binaries link.
    assert!(depends.contains("systemd"), "Depends: {depends}");
    assert!(depends.contains("libc6 (>= "), "Depends: {depends}");

    let info = dpkg_deb(&["--info", deb_arg]);
    for script in ["postinst", "prerm", "postrm", "conffiles"] {
        assert!(info.contains(script), "no {script} in:\n{info}");
    }

    // Every file with its owner and mode: root-owned, binaries executable.
    let contents = dpkg_deb(&["--contents", deb_arg]);
    let entry = |path: &str| {
        contents
            .lines()
            .find(|l| l.ends_with(path))
            .unwrap_or_else(|| panic!("{path} not in the package:\n{contents}"))
            .to_owned()
    };
    for exe in ["./usr/bin/sandboxd", "./usr/bin/sandboxctl"] {
        assert!(
            entry(exe).starts_with("-rwxr-xr-x root/root"),
            "{}",
            entry(exe)
        );
    }
    for file in [
        "./lib/systemd/system/sandboxd.service",
        "./usr/lib/sysusers.d/sandboxd.conf",
        "./etc/default/sandboxd",
    ] {
        assert!(
            entry(file).starts_with("-rw-r--r-- root/root"),
            "{}",
            entry(file)
        );
    }

    // What the scripts and the unit say, as installed.
    let tree = tempfile::tempdir().unwrap();
    dpkg_deb(&["--raw-extract", deb_arg, tree.path().to_str().unwrap()]);
    let read = |p: &str| std::fs::read_to_string(tree.path().join(p)).unwrap();
    let unit = read("lib/systemd/system/sandboxd.service");
    assert!(unit.contains("User=sandboxd"), "{unit}");
    assert!(
        unit.contains("--listen ${SANDBOXD_LISTEN} --token-env SANDBOXD_TOKEN"),
        "{unit}"
    );
    assert!(
        unit.contains("EnvironmentFile=/etc/sandboxd/token.env"),
        "{unit}"
    );
    assert!(unit.contains("WantedBy=multi-user.target"), "{unit}");
    assert!(read("etc/default/sandboxd").contains("SANDBOXD_LISTEN=0.0.0.0:8080"));
    assert_eq!(read("DEBIAN/conffiles").trim(), "/etc/default/sandboxd");
    let postinst = read("DEBIAN/postinst");
    for step in [
        "systemd-sysusers sandboxd.conf",
        "/etc/sandboxd/token.env",
        "systemctl enable sandboxd.service",
    ] {
        assert!(
            postinst.contains(step),
            "postinst lacks {step:?}:\n{postinst}"
        );
    }
    for script in ["postinst", "prerm", "postrm"] {
        let path = tree.path().join("DEBIAN").join(script);
        let syntax = Command::new("sh").arg("-n").arg(&path).status().unwrap();
        assert!(syntax.success(), "{script} is not valid sh");
    }
    // Stripped: what a machine copies in is the code, not its debug info.
    let size = std::fs::metadata(tree.path().join("usr/bin/sandboxd"))
        .unwrap()
        .len();
    let built = std::fs::metadata(test_support::sandboxd_bin())
        .unwrap()
        .len();
    assert!(size <= built, "{size} > {built}");
}

#[test]
fn the_script_names_what_is_missing() {
    let out = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/deb/build-deb.sh");
    let run = Command::new("sh")
        .arg(&script)
        .args(["/nonexistent/sandboxd", "/nonexistent/sandboxctl"])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("/nonexistent/sandboxd is not an executable")
            && err.contains("cargo build -p sandboxd"),
        "{err}"
    );
    let usage = Command::new("sh").arg(&script).output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&usage.stderr).contains("usage: build-deb.sh"));
}
