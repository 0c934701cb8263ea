<?php

namespace Drover\Tests;

use Drover\Config\Exporter;
use Drover\Schedule\Tasks;
use Illuminate\Console\Scheduling\Event;
use Illuminate\Console\Scheduling\EventMutex;
use Illuminate\Console\Scheduling\Schedule;
use Illuminate\Console\Scheduling\SchedulingMutex;
use Illuminate\Container\Container;
use PHPUnit\Framework\TestCase;

/** The schedule as the master reads it (docs/schedule.md): keys, the export, finding an event again. */
final class ScheduleTasksTest extends TestCase
{
    private function schedule(): Schedule
    {
        $container = new Container();
        Container::setInstance($container);
        $mutex = new class implements EventMutex, SchedulingMutex {
            public function create($event, $time = null): bool { return true; }
            public function exists($event, $time = null): bool { return false; }
            public function forget($event): void {}
        };
        $container->instance(EventMutex::class, $mutex);
        $container->instance(SchedulingMutex::class, $mutex);
        return new Schedule('UTC');
    }

    public function testEachEventIsKeyedByItsMutexNameAndRepeatsAreNumbered(): void
    {
        $schedule = $this->schedule();
        $report = $schedule->command('app:report --daily')->dailyAt('13:00');
        $schedule->call(fn () => null)->everyMinute()->name('prune');
        $schedule->call(fn () => null)->everyFiveMinutes()->name('prune');
        $keyed = Tasks::keyed($schedule);
        $this->assertSame($report->mutexName(), $keyed[0]['key']);
        $this->assertSame($keyed[1]['event']->mutexName(), $keyed[1]['key']);
        $this->assertSame($keyed[1]['event']->mutexName() . '#2', $keyed[2]['key']);
    }

    public function testTheExportCarriesWhatTheMasterDecidesDueTimesAndClaimsBy(): void
    {
        $schedule = $this->schedule();
        $schedule->command('app:report --daily')->dailyAt('13:00')->timezone('Europe/Paris')
            ->withoutOverlapping(5)->onOneServer()->runInBackground()->evenInMaintenanceMode();
        \Drover\Schedule\CatchUp::register();
        $schedule->events()[0]->droverCatchUp();
        $schedule->call(fn () => null)->hourly()->name('prune');
        $export = Tasks::export($schedule);
        $this->assertSame(Tasks::EXPORT_VERSION, $export['drover_schedule']);
        [$report, $prune] = $export['tasks'];
        $this->assertSame(0, $report['index']);
        $this->assertSame('artisan app:report --daily', $report['summary']);
        $this->assertSame('0 13 * * *', $report['expression']);
        $this->assertSame('Europe/Paris', $report['timezone']);
        $this->assertTrue($report['one_server']);
        $this->assertTrue($report['without_overlapping']);
        $this->assertSame(5, $report['expires_minutes']);
        $this->assertTrue($report['run_in_background']);
        $this->assertTrue($report['even_in_maintenance']);
        $this->assertNull($report['repeat_seconds']);
        $this->assertTrue($report['catch_up'], 'droverCatchUp()');
        $this->assertFalse($prune['catch_up']);
        $this->assertFalse($report['needs_boot']);
        $schedule->call(fn () => null)->hourly()->name('window')->between('08:00', '17:00');
        $schedule->call(fn () => null)->hourly()->name('not-window')->unlessBetween('08:00', '17:00');
        $schedule->call(fn () => null)->hourly()->name('when')->when(fn () => true);
        $byName = array_column(Tasks::export($schedule)['tasks'], 'needs_boot', 'summary');
        $this->assertTrue($byName['window'], 'between() holds the definition time');
        $this->assertTrue($byName['not-window']);
        $this->assertFalse($byName['when']);
        $this->assertSame('prune', $prune['summary']);
        $this->assertSame('0 * * * *', $prune['expression']);
        $this->assertSame('UTC', $prune['timezone'], "the schedule's zone");
        $this->assertFalse($prune['one_server']);
        if (method_exists(Event::class, 'everyTenSeconds')) {
            $schedule->call(fn () => null)->everyTenSeconds()->name('often');
            $this->assertSame(10, array_column(Tasks::export($schedule)['tasks'], 'repeat_seconds', 'summary')['often']);
        }
        $this->assertSame($export, json_decode(json_encode($export), true), 'plain JSON');
    }

    public function testAnEventIsFoundByItsPositionCheckedAgainstItsKeyElseByItsKey(): void
    {
        $schedule = $this->schedule();
        $a = $schedule->call(fn () => null)->everyMinute()->name('a');
        $b = $schedule->call(fn () => null)->everyMinute()->name('b');
        $this->assertSame($b, Tasks::find($schedule, $b->mutexName(), 1));
        // The schedule changed since the export: the position names another event.
        $this->assertSame($a, Tasks::find($schedule, $a->mutexName(), 1));
        $this->assertNull(Tasks::find($schedule, 'framework/schedule-gone', 0));
    }

    public function testTheScheduleReachesTheMasterOnlyWhenTheApplicationHasOneAndItIsOn(): void
    {
        $drover = ['state_dir' => '/srv/app/storage/drover', 'environments' => ['production' => []], 'defaults' => []];
        $with = Exporter::contract($drover, 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app', null, ['drover'], true);
        $this->assertSame(['/usr/bin/php', '/srv/app/artisan', 'drover:schedule-export'], $with['schedule']['export_command']);
        $this->assertSame(['/usr/bin/php', '/srv/app/artisan', 'drover:schedule-run'], $with['schedule']['run_command']);
        $this->assertSame(7, $with['schedule']['retention_days']);
        $this->assertArrayNotHasKey('fork_from', $with['schedule'], 'no pool: each run is started by run_command');
        $pools = ['environments' => ['production' => ['slow' => ['spawn' => 'exec'], 'web' => [], 'mail' => []]]] + $drover;
        $forked = Exporter::contract($pools, 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app', null, ['drover'], true);
        $this->assertSame('web', $forked['schedule']['fork_from'], 'runs are forked from the first pool that forks');
        $exec = Exporter::contract(['environments' => ['production' => ['slow' => ['spawn' => 'exec']]]] + $drover, 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app', null, ['drover'], true);
        $this->assertSame('exec', $exec['pools'][0]['spawn']);
        $this->assertArrayNotHasKey('fork_from', $exec['schedule'], 'no pool forks: each run is started by run_command');
        $without = Exporter::contract($drover, 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app', null, ['drover'], false);
        $this->assertArrayNotHasKey('schedule', $without, 'an application without a schedule: the contract of the previous release');
        $off = Exporter::contract($drover + ['schedule' => 'false'], 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app', null, ['drover'], true);
        $this->assertArrayNotHasKey('schedule', $off, 'DROVER_SCHEDULE=false');
    }
}
