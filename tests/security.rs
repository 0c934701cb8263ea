//! Who runs as whom, and what the application's user or another local user can turn into more
//! (docs/security.md): each line of its threat model names the test here that proves it. The real
//! binary, real PHP (Laravel 8.83 and 12.67), a real PostgreSQL, and the shipped units applied as
//! systemd would apply them (there is no systemd here).

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// The application's user: it owns the application's storage/ and bootstrap/cache, as on a
/// Forge or Envoyer host (Debian's www-data).
const APP_USER: &str = "www-data";

fn needs_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (scripts/test and CI run the suite as root)"
    );
}

fn app_account() -> nix::unistd::User {
    nix::unistd::User::from_name(APP_USER).unwrap().unwrap()
}

/// `cmd` run as `user` (`runuser -u USER --`).
fn as_user(user: &str, program: &str, args: &[&str]) -> std::process::Output {
    Command::new("runuser")
        .args(["-u", user, "--", program])
        .args(args)
        .output()
        .unwrap()
}

/// `chown -R USER: path`, not following links (a release's shared parts are links to the fixture).
fn give_to_app_user(path: &Path) {
    let out = Command::new("chown")
        .args(["-R", "-h", &format!("{APP_USER}:")])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "chown: {}", said(&out));
}

/// A unit file as systemd reads it: the directives of its sections, comments and blank lines
/// left out, each value as written.
struct Unit(Vec<(String, String)>);

impl Unit {
    fn read(path: &Path) -> Unit {
        let text = std::fs::read_to_string(path).unwrap();
        Unit(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with(['#', ';', '[']))
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// `KEY=VALUE` lines of an environment file, as systemd reads `EnvironmentFile=`.
fn environment_file(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(['#', ';']))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// How a test host installs a unit: the paths the install instructions say to adjust (the
/// application's path), where the package puts the binary, and the instance's environment file.
struct Install<'a> {
    /// `%i`.
    instance: &'a str,
    /// Install-time paths → this test's (applied to the unit's values before anything else).
    paths: Vec<(String, String)>,
    /// The application's own settings (its `.env`, as the process environment here).
    app_env: &'a [(String, String)],
}

/// Starts the unit's `ExecStart` as systemd would: as `User=` (its groups, gid and uid; HOME,
/// USER, LOGNAME) or root without one; with `Environment=` then `EnvironmentFile=` (the file
/// wins) and `${VAR}` expanded in the command line; stdout and stderr to `log`.
fn start_as_systemd_would(unit: &Unit, install: &Install, log: &Path) -> Spawned {
    let place = |value: &str| -> String {
        let mut value = value.replace("%i", install.instance);
        for (from, to) in &install.paths {
            value = value.replace(from.as_str(), to);
        }
        value
    };
    let mut env: BTreeMap<String, String> = install.app_env.iter().cloned().collect();
    for line in unit.all("Environment") {
        let (k, v) = line.split_once('=').unwrap();
        env.insert(k.to_string(), place(v));
    }
    for file in unit.all("EnvironmentFile") {
        for (k, v) in environment_file(Path::new(&place(file))) {
            env.insert(k, v);
        }
    }
    let words: Vec<String> = place(unit.get("ExecStart").unwrap())
        .split_whitespace()
        .map(|w| {
            let mut w = w.to_string();
            for (k, v) in &env {
                w = w.replace(&format!("${{{k}}}"), v);
            }
            w
        })
        .collect();
    let log = std::fs::File::create(log).unwrap();
    let mut cmd = Command::new(&words[0]);
    cmd.args(&words[1..])
        .env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .envs(&env)
        // No WorkingDirectory=: systemd starts services in /.
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    match unit.get("User") {
        Some(name) => {
            let user = nix::unistd::User::from_name(name).unwrap().unwrap();
            let cname = std::ffi::CString::new(name).unwrap();
            let groups: Vec<libc::gid_t> = nix::unistd::getgrouplist(&cname, user.gid)
                .unwrap()
                .iter()
                .map(|g| g.as_raw())
                .collect();
            let (uid, gid) = (user.uid.as_raw(), user.gid.as_raw());
            cmd.env("HOME", &user.dir)
                .env("USER", name)
                .env("LOGNAME", name);
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                        || libc::setgid(gid) != 0
                        || libc::setuid(uid) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        None => {
            cmd.env("HOME", "/root")
                .env("USER", "root")
                .env("LOGNAME", "root");
        }
    }
    Spawned(cmd.spawn().unwrap())
}

/// Every process of the tree under `top` (`top` included), with its real uid.
fn tree_uids(top: i32) -> Vec<(i32, u32)> {
    let mut parents: BTreeMap<i32, i32> = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The fields after the command's closing parenthesis: state, ppid, ...
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: i32 = after.split(' ').nth(1).unwrap().parse().unwrap();
        parents.insert(pid, ppid);
    }
    let in_tree = |mut pid: i32| loop {
        if pid == top {
            return true;
        }
        match parents.get(&pid) {
            Some(&p) if p > 1 => pid = p,
            _ => return false,
        }
    };
    parents
        .keys()
        .filter(|&&pid| in_tree(pid))
        .filter_map(|&pid| Some((pid, process_uid(pid)?)))
        .collect()
}

/// `drover status --json` of the master of `state_dir`, asked as root.
fn status(state_dir: &Path) -> (serde_json::Value, Option<i32>) {
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["status", "--json", "--state-dir"])
        .arg(state_dir)
        .output()
        .unwrap();
    (
        serde_json::from_slice(&out.stdout).unwrap_or_default(),
        out.status.code(),
    )
}

async fn wait_serving(state_dir: &Path, log: &Path, generation: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (s, code) = status(state_dir);
        let workers = s["pools"][0]["workers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if code == Some(0)
            && !workers.is_empty()
            && workers
                .iter()
                .all(|w| w["generation"] == generation && w["state"] == "idle")
        {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "not serving generation {generation}: {s}\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The attacker's code, planted by the application's user where Laravel runs it at every boot:
/// `bootstrap/cache/config.php` (loading the real cached configuration after it) and a service
/// provider it adds. Each records the effective uid it ran as in `boots`.
fn plant_boot_code(release: &Path, boots: &Path, laravel: Laravel, app_env: &[(String, String)]) {
    let cache = release.join("bootstrap/cache");
    // The real configuration, cached by the application's user as `php artisan config:cache`
    // would, under another name.
    let out = Command::new("/usr/sbin/runuser")
        .args(["-u", APP_USER, "--", "php"])
        .arg(release.join("artisan"))
        .arg("config:cache")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .envs(app_env.iter().map(|(k, v)| (k, v)))
        .env("APP_CONFIG_CACHE", cache.join("config.real.php"))
        .current_dir(release)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{laravel:?} config:cache: {}",
        said(&out)
    );
    let logger = cache.join("BootLogger.php");
    std::fs::write(
        &logger,
        format!(
            "<?php\nnamespace Planted;\nclass BootLogger extends \\Illuminate\\Support\\ServiceProvider\n{{\n    public function register(): void\n    {{\n        file_put_contents('{boots}', posix_geteuid() . \" provider\\n\", FILE_APPEND);\n    }}\n}}\n",
            boots = boots.display()
        ),
    )
    .unwrap();
    std::fs::write(
        cache.join("config.php"),
        format!(
            "<?php\nrequire_once '{logger}';\nfile_put_contents('{boots}', posix_geteuid() . \" config\\n\", FILE_APPEND);\n$config = require __DIR__ . '/config.real.php';\n$config['app']['providers'][] = \\Planted\\BootLogger::class;\nreturn $config;\n",
            logger = logger.display(),
            boots = boots.display()
        ),
    )
    .unwrap();
    give_to_app_user(&cache);
}

/// What the planted code recorded: the uids it ran as, and which plants ran.
fn boots(path: &Path) -> (Vec<u32>, bool, bool) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let uids = text
        .lines()
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect();
    (uids, text.contains(" config"), text.contains(" provider"))
}

/// A file of root's that a planted link points to: it must be left exactly as it was.
struct Victim {
    path: PathBuf,
}

impl Victim {
    fn new(dir: &Path) -> Victim {
        let path = dir.join("victim");
        std::fs::write(&path, "root's own\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        Victim { path }
    }

    fn assert_untouched(&self) {
        let meta = std::fs::metadata(&self.path).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid(), meta.mode() & 0o7777),
            (0, 0, 0o600),
            "root's file was changed through a planted link"
        );
        assert_eq!(std::fs::read_to_string(&self.path).unwrap(), "root's own\n");
    }
}

/// The master started by `start` (as the unit says) refuses to start, naming `what`.
async fn refused(start: impl Fn() -> Spawned, log: &Path, what: &str) {
    let mut master = start();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = master.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the master started with {what} planted:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let text = std::fs::read_to_string(log).unwrap();
    assert!(!status.success(), "{text}");
    assert!(
        text.contains(what),
        "the refusal does not name {what:?}:\n{text}"
    );
}

/// The application's user, acting as an attacker would, against each shipped unit: it plants PHP
/// where Laravel runs it at every boot (a cached configuration and a service provider), has the
/// master reload and exit through the control socket (the unit starts it again), and plants a
/// link and FIFOs in the state directory. No code runs as root — neither under `drover.service`
/// (User=www-data) nor under the package's `drover@.service`, which starts `drover launch` as
/// root — and each planted file is refused by name, root's file behind the link untouched.
async fn the_applications_user_can_make_drover_run_nothing_as_root(laravel: Laravel) {
    needs_root();
    let www = app_account();
    let db = Cluster::start_for_any_user().await;
    let port = db
        .url()
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("port="))
        .unwrap()
        .to_string();
    let app = LaravelApp::on_host("127.0.0.1", laravel, &[("DB_PORT", &port)]);
    let site = Site::new(laravel);
    let release = site.ship("1", 1);
    site.switch_to("1");
    let scratch = shared_tempdir();
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let boots_log = scratch.path().join("boots");
    // The application's user owns its storage and its release, as after a deploy.
    give_to_app_user(&app.storage_dir());
    give_to_app_user(site.dir.path());
    plant_boot_code(&release, &boots_log, laravel, &app.env);
    let state_dir = app.state_dir();
    let victim = Victim::new(scratch.path());
    let log = scratch.path().join("master.log");

    let single = Unit::read(&root().join("dist/drover.service"));
    let template = Unit::read(&root().join("dist/debian/drover@.service"));
    let env_file = scratch.path().join("myapp.env");
    std::fs::write(
        &env_file,
        format!(
            "DROVER_APP={}\nDROVER_USER={APP_USER}\n",
            site.current().display()
        ),
    )
    .unwrap();
    let install = Install {
        instance: "myapp",
        paths: vec![
            // "adjust the application's path in ExecStart" (dist/drover.service)
            (
                "/var/www/app/current".into(),
                site.current().display().to_string(),
            ),
            // The package's binary, and the instance's file.
            (
                "/usr/bin/drover".into(),
                env!("CARGO_BIN_EXE_drover").to_string(),
            ),
            (
                "/etc/drover/myapp.env".into(),
                env_file.display().to_string(),
            ),
        ],
        app_env: &app.env,
    };
    assert!(
        single.get("User") == Some(APP_USER),
        "dist/drover.service runs as the application's user"
    );
    assert!(
        template.get("User").is_none(),
        "drover@.service starts drover launch as root"
    );

    // The state directory a root master of drover 0.2 left (root's, mode 0711, its lock and
    // contract root's): an upgrade needs no step by hand — the first start, as the application's
    // user, moves it aside (no master holds its lock) and starts afresh.
    std::fs::create_dir(&state_dir).unwrap();
    std::fs::set_permissions(&state_dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::write(state_dir.join("master.lock"), "").unwrap();
    std::fs::write(state_dir.join("config.json"), "{}").unwrap();
    std::fs::set_permissions(
        state_dir.join("config.json"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();

    for (name, unit) in [
        ("drover@myapp.service", &template),
        ("drover.service", &single),
    ] {
        let mut master = start_as_systemd_would(unit, &install, &log);
        let serving = wait_serving(&state_dir, &log, 0).await;
        if name == "drover@myapp.service" {
            let text = std::fs::read_to_string(&log).unwrap();
            assert!(
                text.contains("belonged to root") && text.contains("moved aside"),
                "{text}"
            );
            let aside = std::fs::read_dir(app.storage_dir())
                .unwrap()
                .flatten()
                .any(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("drover.root-owned-")
                });
            assert!(aside, "the old state directory is kept beside the new one");
        }
        // The master (PHP exec'd it in its place: the unit's main PID), its lease guard, zygote
        // and workers: all the application's user's.
        assert_eq!(
            serving["pid"].as_i64(),
            Some(i64::from(master.id())),
            "{name}: the main PID is the master"
        );
        let tree = tree_uids(master.id() as i32);
        assert!(tree.len() >= 3, "{name}: master, guard, workers: {tree:?}");
        for (pid, uid) in &tree {
            assert_eq!(
                *uid,
                www.uid.as_raw(),
                "{name}: process {pid} runs as uid {uid}"
            );
        }
        // The state directory and its sockets: the application's user's, closed to others.
        for (file, mode) in [
            ("", 0o750),
            ("control.sock", 0o660),
            ("fork.sock", 0o600),
            ("config.json", 0o600),
        ] {
            let meta = std::fs::metadata(state_dir.join(file)).unwrap();
            assert_eq!(
                (meta.uid(), meta.mode() & 0o777),
                (www.uid.as_raw(), mode),
                "{name}: the state directory's {file:?}"
            );
        }

        // Through the control socket, as the application's user: a reload (the export runs again,
        // the planted code with it), then an exit — the unit's Restart=always starts it again.
        let state = state_dir.to_str().unwrap();
        let out = as_user(
            APP_USER,
            env!("CARGO_BIN_EXE_drover"),
            &["restart", "--state-dir", state],
        );
        assert!(out.status.success(), "{name}: {}", said(&out));
        wait_serving(&state_dir, &log, 1).await;
        let out = as_user(
            APP_USER,
            env!("CARGO_BIN_EXE_drover"),
            &["terminate", "--state-dir", state],
        );
        assert!(out.status.success(), "{name}: {}", said(&out));
        assert!(
            master.wait().unwrap().success(),
            "{name}: {}",
            std::fs::read_to_string(&log).unwrap()
        );
    }

    // Planted in the state directory by the application's user, one at a time; the unit starts
    // the master again after each (Restart=always) and it refuses, naming what it found.
    let start = || start_as_systemd_would(&template, &install, &log);
    let plant = |script: String| {
        let out = as_user(APP_USER, "sh", &["-c", &script]);
        assert!(out.status.success(), "{}", said(&out));
    };
    let s = state_dir.display();
    plant(format!(
        "ln -s {} {s}/master.lock.new && mv -fT {s}/master.lock.new {s}/master.lock",
        victim.path.display()
    ));
    refused(start, &log, "master.lock is a symbolic link").await;
    plant(format!("rm {s}/master.lock && mkfifo {s}/control.sock"));
    refused(start, &log, "control.sock is a FIFO").await;
    plant(format!(
        "rm {s}/control.sock && rm {s}/config.json && mkfifo {s}/config.json"
    ));
    refused(start, &log, "config.json is a FIFO").await;
    plant(format!(
        "rm {s}/config.json && ln -s {} {s}/master.json",
        victim.path.display()
    ));
    // A link where master.json goes is replaced, never written through.
    let mut master = start();
    wait_serving(&state_dir, &log, 0).await;
    victim.assert_untouched();
    let out = as_user(
        APP_USER,
        env!("CARGO_BIN_EXE_drover"),
        &["terminate", "--state-dir", state_dir.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", said(&out));
    assert!(master.wait().unwrap().success());

    // Every boot of the application — the services, their reloads, their workers — ran the planted
    // code, and none as root.
    let (uids, config, provider) = boots(&boots_log);
    assert!(config && provider, "the planted code ran: {uids:?}");
    assert!(uids.len() >= 8, "every boot ran it: {uids:?}");
    assert!(
        uids.iter().all(|&uid| uid == www.uid.as_raw()),
        "application code ran as {uids:?}"
    );
    victim.assert_untouched();
    db.stop().await;
}

on_every_laravel!(the_applications_user_can_make_drover_run_nothing_as_root);

/// A contract the application's user can write — or a FIFO in its place — is what the issue's
/// reviewer fed a root master: a pool whose command is anything, run as root. A root-started
/// master reads only root's files, and no command of it runs.
#[tokio::test]
async fn a_root_started_master_refuses_a_contract_another_user_can_write() {
    needs_root();
    let dir = shared_tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let ran = dir.path().join("ran");
    let contract = dir.path().join("config.json");
    let text = serde_json::json!({
        "version": 1, "database_url": "host=/nonexistent dbname=x",
        "state_dir": dir.path().join("state"), "user": null,
        "pools": [{"name": "default", "queues": ["default"], "processes": 1,
                   "command": ["sh", "-c", format!("id -u > {}", ran.display())]}],
    })
    .to_string();
    let run = |path: &Path| {
        Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(["run", "--config"])
            .arg(path)
            .env_remove("DATABASE_URL")
            .output()
            .unwrap()
    };
    // Written by the application's user.
    let out = as_user(
        APP_USER,
        "sh",
        &[
            "-c",
            &format!("umask 077; printf '%s' '{text}' > {}", contract.display()),
        ],
    );
    assert!(out.status.success(), "{}", said(&out));
    let out = run(&contract);
    assert!(!out.status.success());
    assert!(
        said(&out).contains("a root-started master reads only root's files"),
        "{}",
        said(&out)
    );
    // A FIFO in its place: refused at once, never waited on.
    std::fs::remove_file(&contract).unwrap();
    nix::unistd::mkfifo(&contract, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
    let out = run(&contract);
    assert!(
        said(&out).contains("is a FIFO (named pipe)"),
        "{}",
        said(&out)
    );
    // A link to a file of root's: not followed.
    std::fs::remove_file(&contract).unwrap();
    let roots = dir.path().join("roots.json");
    std::fs::write(&roots, &text).unwrap();
    std::os::unix::fs::symlink(&roots, &contract).unwrap();
    let out = run(&contract);
    assert!(said(&out).contains("is a symbolic link"), "{}", said(&out));
    assert!(!ran.exists(), "a command of the planted contract ran");
}
#[tokio::test]
async fn a_root_started_master_becomes_the_configured_user_and_so_do_its_workers() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (scripts/test and CI run the suite as root)"
    );
    let db = Cluster::start_for_any_user().await;
    let marker_dir = support::shared_tempdir();
    std::fs::set_permissions(
        marker_dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out = marker_dir.path().join("whoami");
    let script = format!("id -un > {}; exec sleep 600", out.display());
    let drover = Drover::start_worker(
        Some(db.url()),
        None,
        &["--workers", "1", "--user", "nobody"],
        &["sh", "-c", &script],
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    // The shell creates the file before `id` writes to it: wait for its line.
    while std::fs::read_to_string(&out).map_or(true, |s| !s.ends_with('\n')) {
        assert!(Instant::now() < deadline, "{}", drover.log_text());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(std::fs::read_to_string(&out).unwrap().trim(), "nobody");
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    assert_eq!(
        support::process_uid(drover.pid()),
        Some(nobody.uid.as_raw()),
        "the master itself is nobody's: {}",
        drover.log_text()
    );
    drop(drover);
}

/// `drover status` as another OS user: its exit code and what it printed.
fn status_as(user: &str, state_dir: &std::path::Path) -> (Option<i32>, String) {
    let out = std::process::Command::new("runuser")
        .args([
            "-u",
            user,
            "--",
            env!("CARGO_BIN_EXE_drover"),
            "status",
            "--state-dir",
        ])
        .arg(state_dir)
        .output()
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test]
async fn the_control_socket_answers_the_masters_user_and_says_permission_denied_to_anyone_else() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (scripts/test and CI run the suite as root)"
    );
    let db = Cluster::start_for_any_user().await;
    // A worker that needs no database.
    let scratch = support::shared_tempdir();
    let handler = scratch.path().join("noop.php");
    std::fs::write(&handler, "<?php\nreturn function ($job): void {};\n").unwrap();
    let worker = support::root().join("php-client/bin/drover-worker");
    let drover = Drover::start_worker(
        Some(db.url()),
        None,
        &["--workers", "1", "--user", "www-data"],
        &["php", worker.to_str().unwrap(), handler.to_str().unwrap()],
    );
    drover
        .wait_status("a serving worker", Duration::from_secs(20), |s| {
            s["health"] == "serving"
        })
        .await;
    let socket = drover.state_dir.join("control.sock");
    let meta = std::fs::metadata(&socket).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.mode() & 0o777, 0o660, "the socket's mode");
    assert_eq!(meta.gid(), 33, "the socket belongs to www-data's group");

    // The application's user (the workers' user) reads the status of a root-started master.
    let (code, out) = status_as("www-data", &drover.state_dir);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("serving"), "{out}");
    // Anyone else is refused, and told so: not "no master is running".
    let (code, out) = status_as("nobody", &drover.state_dir);
    assert_eq!(code, Some(4), "{out}");
    assert!(
        out.contains("permission denied on the drover control socket")
            && out.contains("member of group www-data"),
        "{out}"
    );
    assert!(!out.contains("no drover master is running"), "{out}");
    // The application's user can deploy too: `drover restart` (what `php artisan drover:restart`
    // sends) replaces the workers, no sudo needed.
    let restart = std::process::Command::new("runuser")
        .args([
            "-u",
            "www-data",
            "--",
            env!("CARGO_BIN_EXE_drover"),
            "restart",
            "--state-dir",
        ])
        .arg(&drover.state_dir)
        .output()
        .unwrap();
    assert!(
        restart.status.success(),
        "{}",
        String::from_utf8_lossy(&restart.stderr)
    );
    drover
        .wait_status("the workers replaced", Duration::from_secs(20), |s| {
            s["pools"][0]["generation"] == 1
                && s["pools"][0]["workers"]
                    .as_array()
                    .is_some_and(|w| w.len() == 1 && w[0]["generation"] == 1)
        })
        .await;
    drover.stop().await;
    db.stop().await;
}
