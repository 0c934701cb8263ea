<?php

namespace Drover\Tests;

use Drover\Dashboard\HumanTime;
use Drover\Dashboard\Repositories\WorkflowRepository;
use Drover\Dashboard\Workflows\GraphLayout;
use Drover\Dashboard\Workflows\GraphSvg;
use Drover\Dashboard\Workflows\WorkflowFilter;
use Drover\Dashboard\Workflows\WorkflowPage;
use PHPUnit\Framework\TestCase;

/**
 * The console's workflow parts that need no database: the layered layout of a graph (a node's
 * layer is the longest path to it, every edge goes right, an edge spanning layers is routed
 * through each layer between, boxes never overlap), its SVG (every node and edge, names
 * escaped), the list's search read from a query and its cursor, and a node's words.
 */
final class WorkflowConsolePartsTest extends TestCase
{
    /** @return list<array{name: string, deps: list<string>}> */
    private static function graph(array $deps): array
    {
        return array_map(fn ($name) => ['name' => (string) $name, 'deps' => $deps[$name]], array_keys($deps));
    }

    public function testALayerIsTheLongestPathFromTheRootsAndEveryEdgeGoesRight(): void
    {
        // fetch → parse → resize → report, fetch → thumbs, parse → report (a long edge), and a
        // second root, audit, that report waits for too.
        $layout = GraphLayout::of(self::graph([
            'fetch' => [],
            'parse' => ['fetch'],
            'resize' => ['parse'],
            'thumbs' => ['fetch'],
            'report' => ['resize', 'parse', 'audit'],
            'audit' => [],
        ]));
        $this->assertSame(['fetch' => 0, 'parse' => 1, 'resize' => 2, 'thumbs' => 1, 'report' => 3, 'audit' => 0], $layout->layers);
        $this->assertCount(6, $layout->boxes);
        $this->assertCount(6, $layout->edges);
        foreach ($layout->edges as $edge) {
            $points = $edge['points'];
            [$fx] = $layout->boxes[$edge['from']];
            [$tx] = $layout->boxes[$edge['to']];
            $this->assertEqualsWithDelta($fx + GraphLayout::BOX_WIDTH, $points[0][0], 0.01, 'an edge leaves its dependency\'s right side');
            $this->assertEqualsWithDelta($tx, end($points)[0], 0.01, 'and arrives at the left side of the node waiting for it');
            for ($i = 1; $i < count($points); $i++) {
                $this->assertGreaterThanOrEqual($points[$i - 1][0], $points[$i][0], "{$edge['from']} → {$edge['to']} goes right");
            }
            $spans = $layout->layers[$edge['to']] - $layout->layers[$edge['from']];
            $this->assertCount(2 + 2 * ($spans - 1), $points, 'two points across each layer it passes');
        }
        // No two boxes overlap, and each lies inside the drawing.
        $boxes = array_values($layout->boxes);
        foreach ($boxes as $i => [$x, $y]) {
            $this->assertLessThanOrEqual($layout->width, $x + GraphLayout::BOX_WIDTH);
            $this->assertLessThanOrEqual($layout->height, $y + GraphLayout::BOX_HEIGHT);
            foreach (array_slice($boxes, $i + 1) as [$x2, $y2]) {
                $apart = abs($x - $x2) >= GraphLayout::BOX_WIDTH || abs($y - $y2) >= GraphLayout::BOX_HEIGHT;
                $this->assertTrue($apart, "boxes at ($x, $y) and ($x2, $y2) overlap");
            }
        }
        // The long edge parse → report passes layer 2 at a point of its own, not through resize.
        $long = array_values(array_filter($layout->edges, fn ($e) => $e['from'] === 'parse' && $e['to'] === 'report'))[0];
        $this->assertNotEqualsWithDelta($layout->boxes['resize'][1] + GraphLayout::BOX_HEIGHT / 2, $long['points'][1][1], 1.0);
    }

    public function testTheOrderWithinALayerUncrossesADiamondAndKeepsDeclarationOrderOtherwise(): void
    {
        // Declared so that the naive order crosses: a's child is declared last.
        $layout = GraphLayout::of(self::graph(['a' => [], 'b' => [], 'bb' => ['b'], 'aa' => ['a']]));
        $this->assertLessThan($layout->boxes['b'][1], $layout->boxes['a'][1], 'roots in declaration order');
        $this->assertLessThan($layout->boxes['bb'][1], $layout->boxes['aa'][1], 'each child beside its parent: no crossing');
        // A single node, names that are numbers, an unknown dependency and a self-dependency.
        $one = GraphLayout::of(self::graph(['1' => ['1', 'gone'], '2' => ['1']]));
        $this->assertSame([0, 1], [$one->layers['1'], $one->layers['2']]);
        $this->assertCount(1, $one->edges);
    }

    public function testACycleNeverLoopsTheLayoutAndAWideFanOutStaysInItsLayer(): void
    {
        $cycle = GraphLayout::of(self::graph(['a' => [], 'b' => ['a', 'c'], 'c' => ['b']]));
        $this->assertSame(0, $cycle->layers['a']);
        $this->assertSame(1, $cycle->layers['b']);
        $this->assertSame(1, $cycle->layers['c']);
        $deps = ['root' => []];
        for ($i = 0; $i < 200; $i++) {
            $deps["n$i"] = ['root'];
        }
        $deps['end'] = array_map(fn ($i) => "n$i", range(0, 199));
        $wide = GraphLayout::of(self::graph($deps));
        $this->assertSame(2, $wide->layers['end']);
        $this->assertCount(400, $wide->edges);
    }

    public function testTheSvgHasEveryNodeAndEdgeAndEscapesNames(): void
    {
        $nodes = self::graph(['fetch' => [], '<script>alert(1)</script>' => ['fetch'], 'a "quoted" & long name that is longer than a box' => ['fetch']]);
        $layout = GraphLayout::of($nodes);
        $boxes = [];
        foreach ($nodes as $i => $n) {
            $boxes[$n['name']] = ['state' => ['completed', 'failed', 'running'][$i], 'detail' => '1/2 done', 'href' => "#node-$i", 'title' => $n['name'], 'done' => 0.5, 'sub' => $i === 2];
        }
        $svg = GraphSvg::svg($layout, $boxes, 'a <graph>');
        $this->assertStringStartsWith('<svg class="wf-graph"', $svg);
        $this->assertStringNotContainsString('<script>', $svg);
        $this->assertStringContainsString('data-node="&lt;script&gt;alert(1)&lt;/script&gt;"', $svg);
        $this->assertStringContainsString('data-node="a &quot;quoted&quot; &amp; long name that is longer than a box"', $svg);
        $this->assertSame(3, substr_count($svg, 'class="wf-node '));
        $this->assertSame(2, substr_count($svg, 'class="wf-edge"'));
        $this->assertStringContainsString('class="wf-node wf-failed"', $svg);
        $this->assertStringContainsString('fill="' . GraphSvg::COLOURS['failed'][0] . '"', $svg);
        $this->assertStringContainsString('href="#node-1"', $svg);
        $this->assertSame(3, substr_count($svg, 'class="wf-done"'));
        $xml = new \DOMDocument();
        $this->assertTrue($xml->loadXML($svg), 'well-formed XML');
    }

    public function testTheListsSearchIsReadFromItsQueryAndEachProblemNamesItsParameter(): void
    {
        [$filter, $problems] = WorkflowFilter::fromQuery(['name' => 'imp_ort-%', 'state' => 'failed', 'within' => '7d']);
        $this->assertSame([], $problems);
        $this->assertSame('imp\\_ort-\\%%', $filter->likePattern(), 'LIKE\'s wildcards are the prefix\'s own characters');
        $this->assertSame(7 * 86400, $filter->withinSecs);
        $this->assertSame(['name' => 'imp_ort-%', 'state' => 'failed', 'within' => '7d'], $filter->query());
        $this->assertSame('Failed workflows named “imp_ort-%…” created within the last 7 days', $filter->describe());
        [$all] = WorkflowFilter::fromQuery(['name' => '', 'state' => '', 'within' => '']);
        $this->assertFalse($all->any());
        $this->assertNull($all->likePattern());
        [$none, $problems] = WorkflowFilter::fromQuery(['state' => 'done', 'within' => '2 weeks', 'name' => str_repeat('x', 201)]);
        $this->assertNull($none);
        $this->assertCount(3, $problems);
        $this->assertStringStartsWith('name is longer than 200', $problems[0]);
        $this->assertStringStartsWith('state must be one of pending, running, completed, failed, cancelled', $problems[1]);
        $this->assertStringStartsWith('within must be a number and a unit', $problems[2]);
        [, $problems] = WorkflowFilter::fromQuery(['state' => ['failed']]);
        $this->assertSame(['state must be one value'], $problems);
        $this->assertSame(5400, WorkflowFilter::seconds('90m'));
        $this->assertNull(WorkflowFilter::seconds('3651d'));
        $this->assertNull(WorkflowFilter::seconds('0h'));
    }

    public function testAPagesCursorIsReadBackOrIgnored(): void
    {
        $this->assertSame(['2026-05-01T10:00:00.123456Z', '42'], WorkflowRepository::cursor('2026-05-01T10:00:00.123456Z_42'));
        foreach (['42', '', '2026-05-01 10:00:00_42', "2026-05-01T10:00:00.123456Z_42'--", '2026-05-01T10:00:00.123456Z_'] as $bad) {
            $this->assertNull(WorkflowRepository::cursor($bad), $bad);
        }
    }

    public function testANodesCauseConditionAndDurationInWords(): void
    {
        $this->assertSame('“parse” failed', WorkflowPage::cause('parse'));
        $this->assertSame('its condition was false', WorkflowPage::cause('condition'));
        $this->assertSame('the workflow was cancelled', WorkflowPage::cause('cancelled'));
        $this->assertSame('when parse.rows > 1000', WorkflowPage::condition(['node' => 'parse', 'path' => ['rows'], 'op' => '>', 'value' => 1000]));
        $this->assertSame('when fetch exists', WorkflowPage::condition(['node' => 'fetch', 'path' => [], 'op' => 'exists', 'value' => null]));
        $this->assertSame('when parse.a.b = "x"', WorkflowPage::condition(['node' => 'parse', 'path' => ['a', 'b'], 'op' => '=', 'value' => 'x']));
        $this->assertSame('850 ms', HumanTime::duration(0.85));
        $this->assertSame('2.5 s', HumanTime::duration(2.5));
        $this->assertSame('4 min 5 s', HumanTime::duration(245));
        $this->assertSame('2 h', HumanTime::duration(7200));
        $this->assertSame('2 d 3 h', HumanTime::duration(2 * 86400 + 3 * 3600 + 59));
        $this->assertSame('–', HumanTime::duration(null));
    }
}
