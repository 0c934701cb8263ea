//! Fork mode's zygotes as the loop sees them: their events go to their line, and when a line's
//! zygote becomes ready (or its pool falls back to exec) the pools forking from it fill their
//! empty places (docs/decisions/0001-fork-workers-from-a-zygote.md).

use drover_supervisor::ZygoteEvent;

use super::Master;

impl Master {
    /// The zygote lines of pools in fork mode.
    pub(super) fn zygote_lines(&self) -> Vec<drover_supervisor::ZygoteLine> {
        self.reconfig
            .reloading
            .context
            .zygotes
            .as_ref()
            .map(|z| z.all())
            .unwrap_or_default()
    }

    pub(super) fn on_zygote_event(&mut self, line: &str, event: ZygoteEvent) {
        let Some(found) = self
            .reconfig
            .reloading
            .context
            .zygotes
            .as_ref()
            .and_then(|z| z.get(line))
        else {
            return;
        };
        if found.on_event(event) {
            self.refill_pools_of(line);
        }
    }

    /// The boot timeouts of the zygotes (with the pools' own tick).
    pub(super) fn tick_zygotes(&mut self) {
        for line in self.zygote_lines() {
            if line.tick() {
                self.refill_pools_of(&line.name());
            }
        }
    }

    /// Places of the pools forking from `line` that wait for a zygote are filled.
    pub(super) fn refill_pools_of(&mut self, line: &str) {
        if !self.life.running() {
            return;
        }
        for id in self.pools.ids() {
            let p = &mut self.pools[id];
            if p.pool().line().is_some_and(|l| l.name() == line) {
                p.refill();
                self.claimer.want(id);
            }
        }
    }
}
