//! The per-job records the benchmark's job (`App\Jobs\BenchJob`) appends: one file per worker
//! process in the run directory, one line per job, `seq attempt pid started finished` (wall-clock
//! seconds). Read incrementally, so polling for completion during a million-job drain stays cheap.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Every completed job's record, in the order read.
#[derive(Debug, Default, Clone)]
pub struct Runs {
    pub seq: Vec<i32>,
    pub attempt: Vec<i32>,
    pub pid: Vec<i32>,
    pub started: Vec<f64>,
    pub finished: Vec<f64>,
}

impl Runs {
    pub fn len(&self) -> usize {
        self.seq.len()
    }
}

/// The reader of a run directory.
pub struct Records {
    dir: PathBuf,
    /// How far each file has been read.
    offsets: HashMap<PathBuf, u64>,
    /// A file's last line, still being written (no newline yet).
    partial: HashMap<PathBuf, String>,
    runs: Runs,
}

impl Records {
    pub fn new(dir: &Path) -> anyhow::Result<Records> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Records {
            dir: dir.to_path_buf(),
            offsets: HashMap::new(),
            partial: HashMap::new(),
            runs: Runs::default(),
        })
    }

    /// Deletes every record: the next run starts from nothing.
    pub fn clear(&mut self) -> anyhow::Result<()> {
        for entry in std::fs::read_dir(&self.dir)? {
            std::fs::remove_file(entry?.path())?;
        }
        self.offsets.clear();
        self.partial.clear();
        self.runs = Runs::default();
        Ok(())
    }

    /// Reads what was appended since the last call; returns how many jobs completed in all.
    pub fn refresh(&mut self) -> anyhow::Result<usize> {
        for entry in std::fs::read_dir(&self.dir)? {
            let path = entry?.path();
            let offset = self.offsets.entry(path.clone()).or_insert(0);
            let mut file = std::fs::File::open(&path)?;
            file.seek(SeekFrom::Start(*offset))?;
            let mut text = self.partial.remove(&path).unwrap_or_default();
            let read = file.read_to_string(&mut text)?;
            *offset += read as u64;
            let complete = text.rfind('\n').map(|i| i + 1).unwrap_or(0);
            for line in text[..complete].lines() {
                let f: Vec<&str> = line.split(' ').collect();
                anyhow::ensure!(
                    f.len() == 5,
                    "malformed record in {}: {line:?}",
                    path.display()
                );
                self.runs.seq.push(f[0].parse()?);
                self.runs.attempt.push(f[1].parse()?);
                self.runs.pid.push(f[2].parse()?);
                self.runs.started.push(f[3].parse()?);
                self.runs.finished.push(f[4].parse()?);
            }
            if complete < text.len() {
                self.partial.insert(path, text[complete..].to_string());
            }
        }
        Ok(self.runs.len())
    }

    pub fn runs(&mut self) -> anyhow::Result<Runs> {
        self.refresh()?;
        Ok(self.runs.clone())
    }
}
