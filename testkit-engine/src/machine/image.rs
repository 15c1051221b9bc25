//! Machine images: a Debian root filesystem made by `debootstrap` from
//! Debian's packages, set up to boot under QEMU and be reached through its
//! guest agent, written into a raw ext4 disk with `mkfs.ext4 -d` (no loop
//! mount), with the kernel and initrd taken out of it for direct boot.
//!
//! Images are cached under a directory of their own (see
//! [`ImageCache::default_dir`]), one directory per recipe, named by a hash
//! of everything that made it (the recipe, the set-up files and commands,
//! the format of this module). A build goes into a hidden `.partial-…`
//! directory under a [guard](super::guard) and is renamed into place only
//! when complete: an interrupted build (error, panic, SIGKILL) leaves no
//! entry, and its guard removes the partial directory.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::guard::Guard;
use super::{require, run_bounded, MachineError};

/// Bumped whenever what a build does changes in a way the recipe does not
/// show, so that old cache entries are not taken for new ones.
const FORMAT: &str = "testkit-machine-image/2";

/// The file an entry is complete with: written last, it names the size of
/// each file of the entry, which must all match.
const COMPLETE_FILE: &str = "complete.json";

/// The Debian release every image is made of.
const SUITE: &str = "bookworm";

/// Debian's mirror, as apt on this machine uses it.
pub const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";

/// What every image holds: systemd as init, the cloud kernel (virtio
/// drivers, small), udev (which starts the guest agent when its port
/// appears), `ip`, the guest agent the host drives the guest with, and
/// D-Bus, without which logind does not run and the guest ignores its
/// power button (QMP `system_powerdown`).
const BASE_PACKAGES: &[&str] = &[
    "dbus",
    "systemd-sysv",
    "linux-image-cloud-amd64",
    "udev",
    "iproute2",
    "qemu-guest-agent",
];

/// The image names there are, with what each adds to [`BASE_PACKAGES`]
/// and its disk size.
const KNOWN: &[(&str, &[&str], u64)] = &[
    ("debian-12", &[], 2048),
    ("debian-12-docker", &["docker.io"], 4096),
];

/// Files written into the tree before it becomes a disk: `(path in the
/// guest, content)`.
const SETUP_FILES: &[(&str, &str)] = &[
    ("etc/fstab", "/dev/vda / ext4 rw,errors=remount-ro 0 1\n"),
    ("etc/hostname", "testkit-machine\n"),
    // The initrd only has to find the root disk: the virtio modules, not
    // most of the kernel's (a smaller initrd unpacks seconds faster
    // under TCG).
    ("etc/initramfs-tools/conf.d/testkit", "MODULES=list\n"),
    ("etc/initramfs-tools/modules", "virtio_pci\nvirtio_blk\n"),
    // QEMU's user-mode network: the guest is 10.0.2.15, the host's
    // forwarded ports arrive there. Static, so that no DHCP wait delays a
    // boot.
    (
        "etc/systemd/network/10-eth0.network",
        "[Match]\nName=eth0\n\n[Network]\nAddress=10.0.2.15/24\nGateway=10.0.2.2\n",
    ),
    // The guest agent is started by udev when its virtio port appears
    // with its name. After a reset (a restart fault), the port's name can
    // come after udev looked at it: no `virtio-ports/` link, no agent, a
    // guest nothing can reach. This asks udev again until the agent runs.
    (
        "etc/systemd/system/testkit-guest-agent.service",
        "[Unit]\nDescription=Start the guest agent once its virtio port has its name\n\
         After=systemd-udevd.service\n\n[Service]\nType=simple\n\
         ExecStart=/bin/sh -c 'for i in $$(seq 60); do \
         systemctl is-active -q qemu-guest-agent.service && exit 0; \
         udevadm trigger --action=add --subsystem-match=virtio-ports; \
         udevadm settle --timeout=5; \
         systemctl start --no-block qemu-guest-agent.service; sleep 1; done; exit 1'\n\n\
         [Install]\nWantedBy=multi-user.target\n",
    ),
];

/// Commands run in the tree (`chroot`) after [`SETUP_FILES`].
const SETUP_COMMANDS: &[&[&str]] = &[
    &["systemctl", "enable", "systemd-networkd.service"],
    &["systemctl", "enable", "testkit-guest-agent.service"],
    // Nothing here waits for "online"; the unit only costs boot time.
    &[
        "systemctl",
        "disable",
        "systemd-networkd-wait-online.service",
    ],
    // No timers that would start apt in a guest without network.
    &[
        "systemctl",
        "mask",
        "apt-daily.timer",
        "apt-daily-upgrade.timer",
    ],
    // Units a test machine has no use for, each seconds of a boot under
    // TCG: module loads for hardware it lacks, scrubs and trims of a disk
    // that lives for one boot, debug filesystems, the journal's move to
    // disk.
    &[
        "systemctl",
        "mask",
        "modprobe@.service",
        "kmod-static-nodes.service",
        "e2scrub_reap.service",
        "e2scrub_all.timer",
        "fstrim.timer",
        "getty-static.service",
        "dev-hugepages.mount",
        "sys-kernel-debug.mount",
        "sys-kernel-tracing.mount",
        "systemd-journal-flush.service",
    ],
    &["update-initramfs", "-u", "-k", "all"],
    // The console may be used to look into a guest by hand.
    &["passwd", "--delete", "root"],
];

/// How long each step of a build may take.
const DEBOOTSTRAP_LIMIT: Duration = Duration::from_secs(20 * 60);
const SETUP_LIMIT: Duration = Duration::from_secs(120);
const MKFS_LIMIT: Duration = Duration::from_secs(10 * 60);

/// What an image is made of.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct ImageRecipe {
    /// Its name (`debian-12`, `debian-12-docker`).
    pub name: String,
    /// The Debian release.
    pub suite: String,
    /// The mirror debootstrap downloads from.
    pub mirror: String,
    /// Packages installed besides the minimal base, sorted.
    pub packages: Vec<String>,
    /// The size of the disk, in MiB.
    pub disk_mib: u64,
}

impl ImageRecipe {
    /// The recipe called `name`, from `mirror`.
    pub fn named(name: &str, mirror: &str) -> Result<ImageRecipe, MachineError> {
        let Some((_, extra, disk_mib)) = KNOWN.iter().find(|k| k.0 == name) else {
            return Err(MachineError::UnknownImage {
                name: name.to_owned(),
                known: KNOWN.iter().map(|k| k.0).collect::<Vec<_>>().join(", "),
            });
        };
        let mut packages: Vec<String> = BASE_PACKAGES
            .iter()
            .chain(extra.iter())
            .map(|p| (*p).to_owned())
            .collect();
        packages.sort();
        Ok(ImageRecipe {
            name: name.to_owned(),
            suite: SUITE.to_owned(),
            mirror: mirror.to_owned(),
            packages,
            disk_mib: *disk_mib,
        })
    }

    /// The names of the recipes there are.
    pub fn known() -> impl Iterator<Item = &'static str> {
        KNOWN.iter().map(|k| k.0)
    }

    /// The hash of everything that makes the image: its cache key.
    pub fn key(&self) -> String {
        let mut h = Sha256::new();
        let mut field = |s: &str| {
            // Length-prefixed, so that no two field lists hash alike.
            h.update((s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        };
        field(FORMAT);
        field(&self.name);
        field(&self.suite);
        field(&self.mirror);
        field(&self.disk_mib.to_string());
        for p in &self.packages {
            field(p);
        }
        for (path, content) in SETUP_FILES {
            field(path);
            field(content);
        }
        for cmd in SETUP_COMMANDS {
            field(&cmd.join("\u{1f}"));
        }
        let digest = h.finalize();
        digest[..16].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A built image, in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Image {
    /// Its recipe's name.
    pub name: String,
    /// Its cache key.
    pub key: String,
    /// Its directory in the cache.
    pub dir: PathBuf,
    /// The raw ext4 disk (the guest's `/dev/vda`); never written: each
    /// boot writes to an overlay of its own.
    pub disk: PathBuf,
    /// The guest's kernel, for direct boot.
    pub kernel: PathBuf,
    /// The guest's initrd.
    pub initrd: PathBuf,
}

impl Image {
    fn at(recipe: &ImageRecipe, dir: PathBuf) -> Image {
        Image {
            name: recipe.name.clone(),
            key: recipe.key(),
            disk: dir.join("disk.raw"),
            kernel: dir.join("vmlinuz"),
            initrd: dir.join("initrd.img"),
            dir,
        }
    }

    fn files(&self) -> [&PathBuf; 3] {
        [&self.disk, &self.kernel, &self.initrd]
    }

    /// Whether the entry is whole: its completion file, written last,
    /// names each file with the size it has. Files alone could be those
    /// of a build cut short, or of an entry damaged since.
    fn complete(&self) -> bool {
        let Ok(text) = std::fs::read(self.dir.join(COMPLETE_FILE)) else {
            return false;
        };
        let Ok(sizes) = serde_json::from_slice::<std::collections::BTreeMap<String, u64>>(&text)
        else {
            return false;
        };
        self.files().iter().all(|path| {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            let size = std::fs::metadata(path).ok().filter(|m| m.is_file()).map(|m| m.len());
            matches!((name.and_then(|n| sizes.get(&n).copied()), size), (Some(a), Some(b)) if a == b && b > 0)
        })
    }

    /// Writes the completion file: the last step of a build.
    fn mark_complete(&self, dir: &Path) -> Result<(), MachineError> {
        let mut sizes = std::collections::BTreeMap::new();
        for path in self.files() {
            let name = path.file_name().expect("an image file has a name");
            let at = dir.join(name);
            let len = std::fs::metadata(&at)
                .map_err(MachineError::io("measure", &at))?
                .len();
            sizes.insert(name.to_string_lossy().into_owned(), len);
        }
        let file = dir.join(COMPLETE_FILE);
        let text = serde_json::to_vec_pretty(&sizes).expect("sizes serialise");
        std::fs::write(&file, text).map_err(MachineError::io("write", &file))
    }
}

/// Where an image came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Provenance {
    /// It was in the cache.
    Cached,
    /// This call built it, in this long.
    Built(Duration),
}

/// The directory images are cached in.
#[derive(Debug, Clone)]
pub struct ImageCache {
    dir: PathBuf,
}

impl ImageCache {
    /// A cache in `dir`, made absolute against the current directory: its
    /// paths go into QEMU's options and into each overlay as its backing
    /// file, which QEMU reads relative to the overlay, not to here.
    pub fn new(dir: impl Into<PathBuf>) -> ImageCache {
        let dir = dir.into();
        ImageCache {
            dir: std::path::absolute(&dir).unwrap_or(dir),
        }
    }

    /// Where images are cached unless told otherwise:
    /// `$XDG_CACHE_HOME/testkit/machines`, else
    /// `$HOME/.cache/testkit/machines`, from `lookup` (the environment, at
    /// the edge). `None` when neither is set.
    pub fn default_dir(lookup: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
        let nonempty = |v: &str| lookup(v).filter(|s| !s.is_empty()).map(PathBuf::from);
        nonempty("XDG_CACHE_HOME")
            .or_else(|| nonempty("HOME").map(|h| h.join(".cache")))
            .map(|c| c.join("testkit").join("machines"))
    }

    /// The cache's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The image of `recipe`, if the cache holds it complete.
    pub fn lookup(&self, recipe: &ImageRecipe) -> Option<Image> {
        let image = Image::at(recipe, self.dir.join(recipe.key()));
        image.complete().then_some(image)
    }

    /// The image of `recipe`: from the cache, or built into it now. Two
    /// processes that want the same image at once build it once: the
    /// second waits on the first's lock of the key, then finds it cached.
    pub async fn ensure(&self, recipe: &ImageRecipe) -> Result<(Image, Provenance), MachineError> {
        if let Some(image) = self.lookup(recipe) {
            return Ok((image, Provenance::Cached));
        }
        let started = Instant::now();
        let _lock = self.lock_key(&recipe.key()).await?;
        if let Some(image) = self.lookup(recipe) {
            return Ok((image, Provenance::Cached));
        }
        let image = self.build(recipe).await?;
        Ok((image, Provenance::Built(started.elapsed())))
    }

    /// An exclusive lock of `key` in the cache (`.lock-<key>`, `flock`ed:
    /// released when this process lets it go or dies).
    async fn lock_key(&self, key: &str) -> Result<nix::fcntl::Flock<std::fs::File>, MachineError> {
        std::fs::create_dir_all(&self.dir).map_err(MachineError::io("create", &self.dir))?;
        let path = self.dir.join(format!(".lock-{key}"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(MachineError::io("open", &path))?;
        // A blocking wait on a thread of its own: a build takes minutes.
        tokio::task::spawn_blocking(move || {
            nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        })
        .await
        .map_err(|e| MachineError::io("lock", &path)(std::io::Error::other(e)))?
        .map_err(|(_, errno)| MachineError::io("lock", &path)(errno.into()))
    }

    /// Builds `recipe` into the cache, whatever it holds (an entry of the
    /// same key that appears meanwhile wins: it was built alike).
    pub async fn build(&self, recipe: &ImageRecipe) -> Result<Image, MachineError> {
        require("debootstrap", "build a machine image", "debootstrap")?;
        require("mkfs.ext4", "build a machine image", "e2fsprogs")?;
        require("unshare", "build a machine image", "util-linux")?;
        std::fs::create_dir_all(&self.dir).map_err(MachineError::io("create", &self.dir))?;
        self.sweep_partials();
        let key = recipe.key();
        let partial = self.dir.join(format!(
            ".partial-{key}-{}-{}",
            std::process::id(),
            crate::ids::random_id(6)
        ));
        // The guard first: from here on, whatever happens to this process,
        // the partial directory and every build command go.
        let guard = Guard::start(&partial)?;
        let built = async {
            std::fs::create_dir(&partial).map_err(MachineError::io("create", &partial))?;
            build_into(&guard, recipe, &partial).await?;
            let image = Image::at(recipe, self.dir.join(&key));
            image.mark_complete(&partial)?;
            // An entry left incomplete (damaged, or of a build before the
            // completion file) is replaced, under the key's lock.
            if image.dir.exists() && !image.complete() {
                std::fs::remove_dir_all(&image.dir)
                    .map_err(MachineError::io("remove an incomplete", &image.dir))?;
            }
            match std::fs::rename(&partial, &image.dir) {
                Ok(()) => Ok(image),
                // Built meanwhile by another process: keep that one.
                Err(_) if image.complete() => Ok(image),
                Err(e) => Err(MachineError::Io {
                    what: "move into place",
                    path: partial.clone(),
                    source: e,
                }),
            }
        }
        .await;
        match built {
            Ok(image) => {
                if partial.exists() {
                    guard.abandon(SETUP_LIMIT).await?;
                } else {
                    guard.release().await?;
                }
                Ok(image)
            }
            Err(e) => {
                // The guard kills what still runs and removes the rest.
                let _ = guard.abandon(SETUP_LIMIT).await;
                Err(e)
            }
        }
    }

    /// Removes the partial directories of builds whose process is gone
    /// (their guard normally removed them; a guard killed with its owner
    /// could not).
    fn sweep_partials(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix(".partial-") else {
                continue;
            };
            let pid = rest.split('-').nth(1).and_then(|p| p.parse::<i32>().ok());
            if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// Makes the image's files in `dir`: the tree, set up; its kernel and
/// initrd; the disk. The tree is removed at the end.
async fn build_into(guard: &Guard, recipe: &ImageRecipe, dir: &Path) -> Result<(), MachineError> {
    let tree = dir.join("tree");
    // In a mount namespace of its own: the filesystems debootstrap mounts
    // in the tree (proc, sys) go with it, however it ends.
    let mut debootstrap = guard.command("unshare");
    debootstrap
        .args(["--mount", "--propagation", "private", "debootstrap"])
        .arg("--variant=minbase")
        .arg(format!("--include={}", recipe.packages.join(",")))
        .arg(&recipe.suite)
        .arg(&tree)
        .arg(&recipe.mirror);
    run_bounded(debootstrap, DEBOOTSTRAP_LIMIT).await?;

    for (path, content) in SETUP_FILES {
        let at = tree.join(path);
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent).map_err(MachineError::io("create", parent))?;
        }
        std::fs::write(&at, content).map_err(MachineError::io("write", &at))?;
    }
    for argv in SETUP_COMMANDS {
        let mut cmd = guard.command("chroot");
        cmd.arg(&tree).args(*argv);
        run_bounded(cmd, SETUP_LIMIT).await?;
    }

    let boot = tree.join("boot");
    for (prefix, name) in [("vmlinuz-", "vmlinuz"), ("initrd.img-", "initrd.img")] {
        let found = only_file_with_prefix(&boot, prefix)?;
        std::fs::copy(&found, dir.join(name)).map_err(MachineError::io("copy", &found))?;
    }

    let disk = dir.join("disk.raw");
    let file = std::fs::File::create(&disk).map_err(MachineError::io("create", &disk))?;
    file.set_len(recipe.disk_mib * 1024 * 1024)
        .map_err(MachineError::io("size", &disk))?;
    drop(file);
    let mut mkfs = guard.command("mkfs.ext4");
    mkfs.args(["-q", "-F", "-L", "testkit-root", "-d"])
        .arg(&tree)
        .arg(&disk);
    run_bounded(mkfs, MKFS_LIMIT).await?;

    std::fs::remove_dir_all(&tree).map_err(MachineError::io("remove", &tree))?;
    let manifest = dir.join("recipe.json");
    let text = serde_json::to_string_pretty(recipe).expect("a recipe serialises");
    std::fs::write(&manifest, text).map_err(MachineError::io("write", &manifest))?;
    Ok(())
}

/// The one file of `dir` whose name starts with `prefix` (the kernel's
/// version is in its name).
fn only_file_with_prefix(dir: &Path, prefix: &str) -> Result<PathBuf, MachineError> {
    let entries = std::fs::read_dir(dir).map_err(MachineError::io("read", dir))?;
    let found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(MachineError::Command {
            command: format!("find {prefix}* in {}", dir.display()),
            status: format!("{} found", found.len()),
            output: "expected exactly one (the cloud kernel's)".to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_listed() {
        let e = ImageRecipe::named("debian-13", DEFAULT_MIRROR).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown machine image \"debian-13\"; expected one of: debian-12, debian-12-docker"
        );
        let docker = ImageRecipe::named("debian-12-docker", DEFAULT_MIRROR).unwrap();
        assert!(docker.packages.contains(&"docker.io".to_owned()));
        assert!(docker.packages.contains(&"qemu-guest-agent".to_owned()));
    }

    #[test]
    fn the_key_follows_everything_that_makes_the_image() {
        let base = ImageRecipe::named("debian-12", DEFAULT_MIRROR).unwrap();
        assert_eq!(base.key(), base.clone().key());
        assert_eq!(base.key().len(), 32);
        let other_mirror = ImageRecipe::named("debian-12", "http://mirror.example/debian").unwrap();
        let docker = ImageRecipe::named("debian-12-docker", DEFAULT_MIRROR).unwrap();
        let mut bigger = base.clone();
        bigger.disk_mib += 1;
        let keys = [base.key(), other_mirror.key(), docker.key(), bigger.key()];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    /// An entry is whole by its completion file, written last with the
    /// size of each file: files alone (a build cut short, an entry of an
    /// older format) or a file whose size changed since are no entry.
    #[test]
    fn an_entry_is_whole_by_its_completion_file_and_the_sizes_it_names() {
        let cache = tempfile::tempdir().unwrap();
        let recipe = ImageRecipe::named("debian-12", DEFAULT_MIRROR).unwrap();
        let image = Image::at(&recipe, cache.path().join(recipe.key()));
        std::fs::create_dir(&image.dir).unwrap();
        for file in image.files() {
            std::fs::write(file, b"some bytes").unwrap();
        }
        let cache = ImageCache::new(cache.path());
        assert_eq!(
            cache.lookup(&recipe),
            None,
            "files without a completion file"
        );
        image.mark_complete(&image.dir).unwrap();
        assert_eq!(cache.lookup(&recipe), Some(image.clone()));
        std::fs::write(&image.disk, b"cut").unwrap();
        assert_eq!(cache.lookup(&recipe), None, "a disk of another size");
    }

    /// A relative cache dir is made absolute: QEMU reads an overlay's
    /// backing file relative to the overlay, not to the current dir.
    #[test]
    fn a_relative_cache_dir_is_made_absolute() {
        let cache = ImageCache::new("rel/cache");
        assert!(cache.dir().is_absolute(), "{}", cache.dir().display());
        assert!(cache.dir().ends_with("rel/cache"));
    }

    /// Two builders of one key take turns: the second holds the key's lock
    /// only once the first let it go.
    #[tokio::test]
    async fn the_lock_of_a_key_is_held_by_one_process_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ImageCache::new(dir.path());
        let first = cache.lock_key("k").await.unwrap();
        let cache2 = cache.clone();
        let second = tokio::spawn(async move { cache2.lock_key("k").await.map(drop) });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!second.is_finished(), "the second took a held lock");
        drop(first);
        tokio::time::timeout(Duration::from_secs(10), second)
            .await
            .expect("the second takes the lock once it is free")
            .unwrap()
            .unwrap();
    }

    #[test]
    fn the_default_dir_follows_xdg_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|p| p.0 == k).map(|p| p.1.to_owned())
        };
        assert_eq!(
            ImageCache::default_dir(env(&[("XDG_CACHE_HOME", "/c"), ("HOME", "/h")])),
            Some(PathBuf::from("/c/testkit/machines"))
        );
        assert_eq!(
            ImageCache::default_dir(env(&[("XDG_CACHE_HOME", ""), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.cache/testkit/machines"))
        );
        assert_eq!(ImageCache::default_dir(env(&[])), None);
    }
}
