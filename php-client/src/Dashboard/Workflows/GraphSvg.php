<?php

namespace Drover\Dashboard\Workflows;

/**
 * A workflow's graph as inline SVG, drawn on the server (no script, no library, readable in a
 * screenshot): each node a box coloured by its state, with its name, its steps done of all and a
 * bar of them, linking to its row of the page; each dependency a line from the node depended on
 * to the node that waits for it, with an arrowhead. Where the boxes go is GraphLayout's. Pure.
 */
final class GraphSvg
{
    /** Fill, stroke and text colour of each node state. */
    public const COLOURS = [
        'pending' => ['#f9fafb', '#9ca3af', '#374151'],
        'waiting' => ['#fef3c7', '#d97706', '#78350f'],
        'running' => ['#dbeafe', '#2563eb', '#1e3a8a'],
        'completed' => ['#dcfce7', '#16a34a', '#14532d'],
        'failed' => ['#fee2e2', '#dc2626', '#7f1d1d'],
        'cancelled' => ['#e5e7eb', '#6b7280', '#4b5563'],
        'skipped' => ['#ffffff', '#9ca3af', '#6b7280'],
    ];

    /** Characters of a name shown in its box (the whole name is in its tooltip and the table). */
    private const NAME_WIDTH = 24;

    /**
     * @param array<string, array{state: string, detail: string, href: string, title: string, done: ?float, sub: bool}> $nodes
     *        by name: its state, the box's second line, where the box links, its tooltip, the
     *        share of its steps done (0 to 1; null: no bar) and whether it is a sub-workflow
     */
    public static function svg(GraphLayout $layout, array $nodes, string $label): string
    {
        $esc = fn (string $s) => htmlspecialchars($s, ENT_QUOTES | ENT_SUBSTITUTE);
        $w = (int) ceil($layout->width);
        $h = (int) ceil($layout->height);
        $svg = "<svg class=\"wf-graph\" role=\"img\" aria-label=\"{$esc($label)}\" viewBox=\"0 0 $w $h\" width=\"$w\" height=\"$h\" xmlns=\"http://www.w3.org/2000/svg\">"
            . '<defs><marker id="wf-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            . '<path d="M 0 0 L 10 5 L 0 10 z" fill="#9ca3af"/></marker></defs>';
        foreach ($layout->edges as $edge) {
            $svg .= sprintf(
                '<path class="wf-edge" data-from="%s" data-to="%s" d="%s" fill="none" stroke="#9ca3af" stroke-width="1.5" marker-end="url(#wf-arrow)"/>',
                $esc((string) $edge['from']),
                $esc((string) $edge['to']),
                self::path($edge['points'])
            );
        }
        $bw = GraphLayout::BOX_WIDTH;
        $bh = GraphLayout::BOX_HEIGHT;
        foreach ($layout->boxes as $name => [$x, $y]) {
            $name = (string) $name;
            $node = $nodes[$name] ?? ['state' => 'pending', 'detail' => '', 'href' => '', 'title' => $name, 'done' => null, 'sub' => false];
            [$fill, $stroke, $ink] = self::COLOURS[$node['state']] ?? self::COLOURS['pending'];
            $shown = mb_strlen($name) > self::NAME_WIDTH ? mb_substr($name, 0, self::NAME_WIDTH - 1) . '…' : $name;
            $svg .= sprintf('<a href="%s"><g class="wf-node wf-%s" data-node="%s">', $esc($node['href']), $esc($node['state']), $esc($name));
            $svg .= '<title>' . $esc($node['title']) . '</title>';
            $svg .= sprintf(
                '<rect x="%.1f" y="%.1f" width="%d" height="%d" rx="6" fill="%s" stroke="%s" stroke-width="%s"%s/>',
                $x, $y, $bw, $bh, $fill, $stroke, $node['sub'] ? '3' : '1.5',
                $node['state'] === 'skipped' || $node['state'] === 'cancelled' ? ' stroke-dasharray="5 3"' : ''
            );
            $svg .= sprintf('<text x="%.1f" y="%.1f" fill="%s" font-size="13" font-weight="600">%s</text>', $x + 9, $y + 19, $ink, $esc($shown));
            $svg .= sprintf('<text x="%.1f" y="%.1f" fill="%s" font-size="11">%s</text>', $x + 9, $y + 35, $ink, $esc($node['detail']));
            if ($node['done'] !== null) {
                $done = max(0.0, min(1.0, (float) $node['done']));
                $svg .= sprintf('<rect x="%.1f" y="%.1f" width="%d" height="4" rx="2" fill="#ffffff" opacity="0.8"/>', $x + 9, $y + $bh - 9, $bw - 18);
                $svg .= sprintf('<rect class="wf-done" x="%.1f" y="%.1f" width="%.1f" height="4" rx="2" fill="%s"/>', $x + 9, $y + $bh - 9, ($bw - 18) * $done, $stroke);
            }
            $svg .= '</g></a>';
        }
        return $svg . '</svg>';
    }

    /**
     * The line through these points: a smooth curve between columns (leaving and arriving
     * level), straight across a column it passes.
     *
     * @param list<array{0: float, 1: float}> $points
     */
    private static function path(array $points): string
    {
        [$x, $y] = $points[0];
        $d = sprintf('M %.1f %.1f', $x, $y);
        for ($i = 1; $i < count($points); $i++) {
            [$nx, $ny] = $points[$i];
            if ($i % 2 === 0) {
                // Across a column: the second point of a pass is level with the first.
                $d .= sprintf(' L %.1f %.1f', $nx, $ny);
            } else {
                $mid = ($x + $nx) / 2;
                $d .= sprintf(' C %.1f %.1f, %.1f %.1f, %.1f %.1f', $mid, $y, $mid, $ny, $nx, $ny);
            }
            [$x, $y] = [$nx, $ny];
        }
        return $d;
    }
}
