//! Machines, for real: an image built from Debian's packages (once per
//! cache), sandboxd installed from its `.deb` in a booted guest and
//! reached on a forwarded port, QEMU's monitor driving the guest, and a
//! boot whose owner is SIGKILLed leaving no QEMU and no overlay.
//!
//! Needs root (debootstrap), Debian's mirror (the first build), and
//! `qemu-system-x86`, `qemu-utils`, `debootstrap`, `dpkg-dev`: a missing
//! one fails the test with the package to install. The image cache is
//! `$TESTKIT_MACHINE_CACHE`, else the user's (`ImageCache::default_dir`).
//! The tests take turns: each boot is a whole emulated machine.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use testkit_engine::machine::{
    Image, ImageCache, ImageRecipe, Machine, MachineObserver, MachineSpec, MachineStep, Provenance,
    DEFAULT_MIRROR,
};

/// One machine test at a time.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The variable that makes this test binary the owner of a machine (see
/// [`owner_helper`]); its value is where the owner writes what it made.
const OWNER_VAR: &str = "TESTKIT_MACHINE_TEST_OWNER";

fn cache() -> ImageCache {
    let dir = std::env::var_os("TESTKIT_MACHINE_CACHE")
        .map(PathBuf::from)
        .or_else(|| ImageCache::default_dir(|k| std::env::var(k).ok()))
        .expect(
            "set TESTKIT_MACHINE_CACHE, XDG_CACHE_HOME or HOME: where machine images are cached",
        );
    ImageCache::new(dir)
}

async fn debian_12() -> (Image, Provenance) {
    let recipe = ImageRecipe::named("debian-12", DEFAULT_MIRROR).unwrap();
    cache()
        .ensure(&recipe)
        .await
        .unwrap_or_else(|e| panic!("the debian-12 image: {e}"))
}

/// Runs `f` on a runtime of its own, bounded: no machine test hangs.
fn bounded<F: std::future::Future<Output = ()>>(limit: Duration, f: F) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(limit, f)
            .await
            .unwrap_or_else(|_| panic!("the test ran longer than {limit:?}"))
    });
}

#[test]
fn an_image_is_cached_whole_under_its_key() {
    bounded(Duration::from_secs(30 * 60), async {
        let _turn = TURN.lock().await;
        let (image, provenance) = debian_12().await;
        if let Provenance::Built(took) = provenance {
            eprintln!("machine image debian-12 built in {took:?}");
        }
        assert_eq!(image.dir.file_name().unwrap().to_str().unwrap(), image.key);
        for file in [&image.disk, &image.kernel, &image.initrd] {
            assert!(file.is_file(), "{} missing", file.display());
        }
        // The tree it was made of is not kept; no build left a partial dir.
        assert!(!image.dir.join("tree").exists());
        let leftovers: Vec<_> = std::fs::read_dir(image.dir.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| {
                n.starts_with(".partial-") && n.contains(&format!("-{}-", std::process::id()))
            })
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        let recipe: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(image.dir.join("recipe.json")).unwrap())
                .unwrap();
        assert_eq!(recipe["name"], "debian-12");
        // Asked again: the cache answers, nothing is built.
        let (again, provenance) = debian_12().await;
        assert_eq!(provenance, Provenance::Cached);
        assert_eq!(again, image);
    });
}

#[test]
fn sandboxd_installed_from_its_deb_answers_on_a_forwarded_port() {
    bounded(Duration::from_secs(40 * 60), async {
        let _turn = TURN.lock().await;
        let (image, _) = debian_12().await;
        let out = tempfile::tempdir().unwrap();
        let deb = test_support::sandboxd_deb(out.path());
        let mut spec = MachineSpec::new(image);
        spec.ports = vec![8080];
        spec.payload = vec![deb];
        let started = Instant::now();
        let mut machine = Machine::boot(&spec)
            .await
            .unwrap_or_else(|e| panic!("boot: {e}"));
        let run_dir = machine.run_dir().to_owned();
        let qemu = machine.qemu_pid();
        eprintln!(
            "booted under {} ({}) in {:?}",
            machine.accel().accel.as_str(),
            machine.accel().why,
            machine.boot_time()
        );
        assert!(run_dir.join("overlay.qcow2").is_file());

        let installed = machine
            .install_payload_debs(Duration::from_secs(600))
            .await
            .unwrap_or_else(|e| panic!("dpkg -i: {e}\nconsole: {}", machine.console_tail()));
        assert!(
            installed.stdout_text().contains("Setting up sandboxd"),
            "{installed:?}"
        );
        let env =
            String::from_utf8(machine.read_file("/etc/sandboxd/token.env").await.unwrap()).unwrap();
        let token = env
            .trim()
            .strip_prefix("SANDBOXD_TOKEN=")
            .unwrap_or_else(|| panic!("token.env holds {env:?}"))
            .to_owned();
        let base = format!("http://127.0.0.1:{}", machine.port(8080).unwrap());
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let health = format!("{base}/api/health");
        let up = wait_for(Duration::from_secs(120), || async {
            client
                .get(&health)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        })
        .await;
        assert!(
            up,
            "no health answer on {health}; console: {}",
            machine.console_tail()
        );
        eprintln!(
            "service answered {:?} after the boot began",
            started.elapsed()
        );

        // It runs as its own user, and the token postinst made is the one
        // it takes.
        let who = machine
            .exec(
                &[
                    "sh",
                    "-c",
                    "stat -c %U /proc/$(systemctl show -p MainPID --value sandboxd.service)",
                ],
                &[],
                Duration::from_secs(60),
            )
            .await
            .unwrap();
        assert_eq!(who.stdout_text().trim(), "sandboxd", "{who:?}");
        let list = client
            .get(format!("{base}/api/sandboxes"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(list.status(), 200);
        let refused = client
            .get(format!("{base}/api/sandboxes"))
            .bearer_auth("wrong")
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 401);

        // The monitor: a paused guest answers nothing, a resumed one does;
        // a cut link reaches nothing, a restored one does.
        machine.pause().await.unwrap();
        let quick = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        assert!(
            quick.get(&health).send().await.is_err(),
            "a paused guest answered"
        );
        machine.cont().await.unwrap();
        assert!(
            wait_for(Duration::from_secs(60), || async {
                quick.get(&health).send().await.is_ok()
            })
            .await
        );
        machine.set_link(false).await.unwrap();
        assert!(
            quick.get(&health).send().await.is_err(),
            "a guest without link answered"
        );
        machine.set_link(true).await.unwrap();
        assert!(
            wait_for(Duration::from_secs(60), || async {
                quick.get(&health).send().await.is_ok()
            })
            .await
        );

        let report = machine.down().await.unwrap();
        assert_eq!(report.removed, run_dir);
        assert!(!run_dir.exists());
        assert!(
            !Path::new(&format!("/proc/{qemu}")).exists(),
            "QEMU {qemu} outlived down"
        );
    });
}

/// Polls `check` every 200 ms until it holds or `limit` passes.
async fn wait_for<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Not a test of its own: with [`OWNER_VAR`] set, this process is the
/// owner a test SIGKILLs. It writes each step of its boot (the group and
/// the run dir, both told before QEMU starts) to the file the variable
/// names, then boots until it is killed. It is not a test of its own:
/// ignored, and run only by the test that kills it.
#[test]
#[ignore = "the owner process that a_killed_owner_leaves_no_qemu_and_no_overlay starts and SIGKILLs"]
fn owner_helper() {
    let record = std::env::var_os(OWNER_VAR)
        .expect("run by a_killed_owner_leaves_no_qemu_and_no_overlay, which sets the variable");
    bounded(Duration::from_secs(10 * 60), async move {
        let (image, _) = debian_12().await;
        let mut spec = MachineSpec::new(image);
        let file = std::sync::Arc::new(std::sync::Mutex::new(
            std::fs::File::create(&record).unwrap(),
        ));
        let write = {
            let file = file.clone();
            move |line: String| {
                let mut f = file.lock().unwrap();
                f.write_all(line.as_bytes()).unwrap();
                f.flush().unwrap();
            }
        };
        let tell = write.clone();
        spec.observer = Some(MachineObserver::new(move |step| match step {
            MachineStep::Group { pgid, .. } => tell(format!("group {pgid}\n")),
            MachineStep::RunDir(dir) => tell(format!("run-dir {}\n", dir.display())),
            _ => {}
        }));
        // A boot that fails says why, for the killing test's message.
        let machine = Machine::boot(&spec).await;
        match &machine {
            Ok(_) => write("booted\n".to_owned()),
            Err(e) => write(format!("boot failed: {e}\n")),
        }
        std::future::pending::<()>().await;
    });
}

#[test]
fn a_killed_owner_leaves_no_qemu_and_no_overlay() {
    bounded(Duration::from_secs(30 * 60), async {
        let _turn = TURN.lock().await;
        // The image first, so that the owner only boots.
        debian_12().await;
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("owner.txt");
        let mut owner = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "owner_helper",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(OWNER_VAR, &record)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The owner's QEMU: the member of the told group that runs qemu,
        // once it has made its overlay.
        let found = wait_for(Duration::from_secs(120), || async {
            owner_qemu(&record).is_some()
        })
        .await;
        let Some((qemu, overlay, run_dir)) = found.then(|| owner_qemu(&record)).flatten() else {
            let _ = owner.kill();
            panic!(
                "the owner started no QEMU with an overlay; it told: {:?}",
                std::fs::read_to_string(&record)
            );
        };
        assert!(overlay.is_file());
        owner.kill().unwrap(); // SIGKILL
        owner.wait().unwrap();
        let gone = wait_for(Duration::from_secs(5), || async {
            !Path::new(&format!("/proc/{qemu}")).exists() && !overlay.exists() && !run_dir.exists()
        })
        .await;
        assert!(
            gone,
            "5s after its owner was SIGKILLed: QEMU {qemu} alive: {}, overlay there: {}",
            Path::new(&format!("/proc/{qemu}")).exists(),
            overlay.exists()
        );
    });
}

/// From the owner's record: QEMU's pid (a member of the told group whose
/// command is QEMU), its overlay and the run dir, once all exist.
fn owner_qemu(record: &Path) -> Option<(i32, PathBuf, PathBuf)> {
    let text = std::fs::read_to_string(record).ok()?;
    let pgid: i32 = text
        .lines()
        .find_map(|l| l.strip_prefix("group "))?
        .parse()
        .ok()?;
    let run_dir = PathBuf::from(text.lines().find_map(|l| l.strip_prefix("run-dir "))?);
    let qemu = testkit_engine::process::group_members(pgid)
        .into_iter()
        .map(|m| m.0)
        .find(|&p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.starts_with(b"qemu-system-x86_64\0"))
        })?;
    let overlay = run_dir.join("overlay.qcow2");
    overlay.is_file().then_some((qemu, overlay, run_dir))
}

/// Every fault a machine pod takes, on one booted guest (a boot under TCG
/// costs a minute): each planned, injected and shown to have taken, then
/// undone and proven undone, each checked here again from outside the
/// fault code (QEMU's monitor, the guest's kernel, the forwarded port);
/// two held at once undone together; what a machine cannot carry refused.
#[test]
fn each_machine_fault_is_injected_shown_undone_and_proven() {
    use testkit_engine::machine::{host_time_ns, MachineAccess, DATA_DIR};
    use testkit_engine::pod::fault::{FaultAction, Link, Reverted, Target, MACHINE_NODE};

    bounded(Duration::from_secs(40 * 60), async {
        let _turn = TURN.lock().await;
        let (image, _) = debian_12().await;
        let out = tempfile::tempdir().unwrap();
        let mut spec = MachineSpec::new(image);
        spec.ports = vec![8080];
        spec.payload = vec![test_support::sandboxd_deb(out.path())];
        spec.data_disk_mib = Some(64);
        let booting = Instant::now();
        let mut machine = Machine::boot(&spec)
            .await
            .unwrap_or_else(|e| panic!("boot: {e}"));
        eprintln!("booted in {:?}", booting.elapsed());
        assert_eq!(machine.mount_data_disk().await.unwrap(), DATA_DIR);
        machine
            .install_payload_debs(Duration::from_secs(600))
            .await
            .unwrap_or_else(|e| panic!("dpkg -i: {e}\nconsole: {}", machine.console_tail()));
        let health = format!(
            "http://127.0.0.1:{}/api/health",
            machine.port(8080).unwrap()
        );
        let quick = reqwest::Client::builder()
            .timeout(Duration::from_secs(3))
            .build()
            .unwrap();
        let answers = || async {
            quick
                .get(&health)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        };
        assert!(
            wait_for(Duration::from_secs(120), answers).await,
            "no health"
        );
        eprintln!("service up {:?} after the boot began", booting.elapsed());

        let access = MachineAccess::new(
            machine.run_dir().to_owned(),
            health.clone(),
            Some(DATA_DIR.into()),
        );
        // What a hung test's report says of the machine: its state, and the
        // end of its journal while the guest runs.
        let said = access.describe(3).await;
        assert!(
            said.starts_with(
                "node machine: running; its last 3 lines (the guest's journal):\n    "
            ) && said.lines().count() == 4,
            "{said}"
        );
        let target = Target::Machine(&access);
        let guest = |script: &'static str| {
            let access = access.clone();
            async move {
                access
                    .sh(script, Duration::from_secs(60))
                    .await
                    .unwrap_or_else(|e| panic!("{script}: {e}"))
            }
        };
        // A restart, first: the guest boots again (another boot id), its service
        // answers; the undo proves it, and QEMU is back to ending when the
        // guest resets on its own.
        let boot_id = guest("cat /proc/sys/kernel/random/boot_id").await;
        let restart = target
            .plan(MACHINE_NODE, FaultAction::Restart)
            .await
            .unwrap();
        let started = Instant::now();
        target.inject(&restart).await.unwrap_or_else(|e| {
            panic!(
                "restart: {}\nconsole: {}",
                testkit_engine::errors::error_chain(&e),
                machine.console_tail()
            )
        });
        eprintln!("restart: the guest was back in {:?}", started.elapsed());
        assert_ne!(guest("cat /proc/sys/kernel/random/boot_id").await, boot_id);
        let undone = target.undo_all(std::slice::from_ref(&restart)).await;
        assert!(matches!(undone[..], [Ok(Reverted::Undone)]), "{undone:?}");
        // The proof saw the service answer; seen again from here, with the
        // slack a guest still starting its units after a boot needs under
        // TCG on a loaded host (a single 3 s try failed there once).
        assert!(
            wait_for(Duration::from_secs(30), answers).await,
            "no health after the restart's undo"
        );
        // The data disk came back with the reboot (it is in the guest's fstab).
        assert!(guest("mountpoint /var/lib/testkit-data")
            .await
            .contains("is a mountpoint"));
        // (First, before the clock faults: a reboot after them was seen
        // taking minutes under TCG, its agent silent past the undo's limit.)

        let ms = Duration::from_millis;
        let actions = [
            FaultAction::Pause,
            FaultAction::Cut {
                from: Vec::new(),
                tests: true,
            },
            FaultAction::Link {
                link: Link::delay(ms(400), ms(50)),
                peer: None,
            },
            FaultAction::Link {
                link: Link::loss(0.3),
                peer: None,
            },
            FaultAction::Link {
                link: Link::duplicate(0.3),
                peer: None,
            },
            FaultAction::Link {
                link: Link::reorder(0.25),
                peer: None,
            },
            FaultAction::Link {
                link: Link::corrupt(0.2),
                peer: None,
            },
            FaultAction::Link {
                link: Link::rate_kbit(512),
                peer: None,
            },
            FaultAction::Clock {
                offset_ms: 3_600_000,
            },
            FaultAction::Clock {
                offset_ms: -86_400_000,
            },
            FaultAction::ClockStrobe {
                offset_ms: 600_000,
                period_ms: 2_000,
                duration_ms: 120_000,
            },
            FaultAction::FillDisk {
                target: String::new(),
                file: String::new(),
            },
        ];
        for action in actions {
            let fault = target.plan(MACHINE_NODE, action).await.unwrap();
            let what = fault.describe();
            let started = Instant::now();
            target
                .inject(&fault)
                .await
                .unwrap_or_else(|e| panic!("{what}: {}", testkit_engine::errors::error_chain(&e)));
            let injected = started.elapsed();
            // Seen from outside the fault code while it is held.
            match &fault.action {
                FaultAction::Pause => {
                    assert_eq!(access.status().await.unwrap(), "paused");
                    assert!(!answers().await, "a paused guest answered");
                    // A frozen guest's agent answers nothing: its console
                    // is read instead, and the report does not hang.
                    let said = access.describe(3).await;
                    assert!(
                        said.starts_with("node machine: paused; its last 3 lines (its console):"),
                        "{said}"
                    );
                }
                FaultAction::Cut { .. } => assert!(!answers().await, "{what}: it answered"),
                FaultAction::Link { .. } => {
                    let qdisc = guest("tc qdisc show dev eth0").await;
                    assert!(qdisc.contains("netem 7e58: root"), "{what}: {qdisc}");
                }
                FaultAction::Clock { offset_ms } => {
                    let off = (access.guest_time_ns().await.unwrap() - host_time_ns()) / 1_000_000;
                    assert!((off - offset_ms).abs() < 10_000, "{what}: {off} ms off");
                }
                FaultAction::ClockStrobe { offset_ms, .. } => {
                    // Seen from outside: the loop runs, and the clock is
                    // seen both ahead and back within a few periods.
                    let pid = guest("cat /run/testkit-clock-strobe.pid").await;
                    assert!(!pid.trim().is_empty(), "{what}: no loop");
                    let (mut ahead, mut back) = (false, false);
                    let until = Instant::now() + Duration::from_secs(30);
                    while !(ahead && back) && Instant::now() < until {
                        let off =
                            (access.guest_time_ns().await.unwrap() - host_time_ns()) / 1_000_000;
                        ahead |= (off - offset_ms).abs() < 10_000;
                        back |= off.abs() < 10_000;
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    assert!(ahead && back, "{what}: ahead {ahead}, back {back}");
                }
                FaultAction::FillDisk { .. } => {
                    let avail =
                        guest("df -B1 --output=avail /var/lib/testkit-data | tail -n 1").await;
                    let avail: u64 = avail.trim().parse().unwrap();
                    assert!(avail < 1 << 20, "{what}: {avail} bytes free");
                }
                _ => unreachable!(),
            }
            let started = Instant::now();
            let undone = target.undo_all(std::slice::from_ref(&fault)).await;
            let undo = started.elapsed();
            match &undone[..] {
                [Ok(Reverted::Undone)] => {}
                other => panic!("{what}: undo {other:?}"),
            }
            eprintln!("{what}: injected and shown in {injected:?}, undone and proven in {undo:?}");
            assert!(answers().await, "{what}: no health after the undo");
            assert_eq!(access.status().await.unwrap(), "running");
            let qdisc = guest("tc qdisc show dev eth0").await;
            assert!(!qdisc.contains("netem"), "{what}: {qdisc}");
            let off = (access.guest_time_ns().await.unwrap() - host_time_ns()) / 1_000_000;
            assert!(
                off.abs() < 10_000,
                "{what}: the clock is {off} ms off after the undo"
            );
            assert!(
                !guest("ls /run").await.contains("testkit-clock-strobe"),
                "{what}: the strobe's pid file is left"
            );
            assert!(
                guest("ls -a /var/lib/testkit-data")
                    .await
                    .lines()
                    .all(|l| l != ".testkit-fill"),
                "{what}: the fill file is left"
            );
        }

        // Two held at once: undone together, newest first, both proven.
        let delay = target
            .plan(
                MACHINE_NODE,
                FaultAction::Link {
                    link: Link::delay(ms(200), ms(0)),
                    peer: None,
                },
            )
            .await
            .unwrap();
        let pause = target.plan(MACHINE_NODE, FaultAction::Pause).await.unwrap();
        target.inject(&delay).await.unwrap();
        target.inject(&pause).await.unwrap();
        let undone = target.undo_all(&[delay, pause]).await;
        assert!(
            undone.iter().all(|u| matches!(u, Ok(Reverted::Undone))),
            "{undone:?}"
        );
        // A fault already undone is found so, and still proven.
        let pause = target.plan(MACHINE_NODE, FaultAction::Pause).await.unwrap();
        target.inject(&pause).await.unwrap();
        access.qmp("cont", None).await.unwrap();
        let undone = target.undo_all(std::slice::from_ref(&pause)).await;
        assert!(
            matches!(undone[..], [Ok(Reverted::AlreadyUndone)]),
            "{undone:?}"
        );

        // What a machine cannot undo is refused before anything is done.
        for action in [FaultAction::Kill, FaultAction::Stop] {
            let e = target.plan(MACHINE_NODE, action).await.unwrap_err();
            assert!(e.to_string().contains("use pause"), "{e}");
        }

        machine.down().await.unwrap();
    });
}
