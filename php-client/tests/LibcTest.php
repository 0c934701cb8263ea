<?php

namespace Drover\Tests;

use Drover\Worker\Libc;
use PHPUnit\Framework\TestCase;

/** The libc calls a forked worker and its zygote make through FFI. */
final class LibcTest extends TestCase
{
    private static function rollup(string $field): int
    {
        foreach (file('/proc/self/smaps_rollup') as $line) {
            if (str_starts_with($line, "$field:")) {
                return (int) preg_replace('/\D/', '', $line);
            }
        }
        return 0;
    }

    public function testPagingOutFreesTheFilePagesOnlyThisProcessMapsAndKeepsTheRest(): void
    {
        $libc = Libc::prepare();
        if (is_string($libc)) {
            $this->markTestSkipped($libc);
        }
        // This process's start-up touched pages of PHP and its extensions that nothing else maps
        // right now, as a zygote's boot does.
        $before = self::rollup('Private_Clean');
        $rss = self::rollup('Rss');
        $advised = $libc->pageOutUnsharedFilePages();
        $after = self::rollup('Private_Clean');
        $this->assertGreaterThan(1024, $advised, 'the binary and its libraries were advised');
        $this->assertLessThan($before / 2, $after, "private clean pages: $before KiB before, $after KiB after");
        $this->assertLessThan($rss, self::rollup('Rss'));
        // The process runs on: the code it needs again comes back from the page cache or the disk.
        $this->assertSame(1, preg_match('/^z(y)go+te$/u', 'zygoooote'));
        $this->assertSame(6, mb_strlen('zygöte'));
    }

    public function testAWorkerIsTiedToItsParentAndToldWhenItIsNotItsMaster(): void
    {
        $libc = Libc::prepare();
        if (is_string($libc)) {
            $this->markTestSkipped($libc);
        }
        // In children: the parent-death signal is for this test process's children, not for it.
        $child = function (int $master, float $wait) use ($libc): ?string {
            $file = tempnam(sys_get_temp_dir(), 'drover-libc-');
            $pid = pcntl_fork();
            if ($pid === 0) {
                $problem = $libc->dieWithParent($master, $wait);
                file_put_contents($file, (string) $problem);
                posix_kill(getmypid(), $problem === null ? SIGUSR1 : SIGUSR2);
            }
            pcntl_waitpid($pid, $status);
            $said = file_get_contents($file);
            unlink($file);
            return pcntl_wtermsig($status) === SIGUSR1 ? null : $said;
        };
        $this->assertNull($child(getmypid(), 0.5), 'its parent is the master: tied');
        $this->assertStringContainsString('not the master', (string) $child(getmypid() + 100000, 0.05));
    }
}
