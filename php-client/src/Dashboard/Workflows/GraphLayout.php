<?php

namespace Drover\Dashboard\Workflows;

/**
 * Where a workflow's nodes go in its drawing: a layered layout, left to right. A node's layer is
 * the longest path to it from a node without dependencies (so every edge goes right); an edge
 * that spans several layers passes through a point in each layer between, so it is routed
 * around the boxes there rather than through them; the nodes of each layer are ordered to cross
 * few edges (a few sweeps of the barycenter heuristic, ties kept in declaration order). Pure:
 * names and dependencies in, coordinates out.
 */
final class GraphLayout
{
    public const BOX_WIDTH = 172;
    public const BOX_HEIGHT = 50;
    private const GAP_X = 64;
    private const GAP_Y = 18;
    private const PAD = 10;
    /** Sweeps of the barycenter ordering (down, then up, each). */
    private const SWEEPS = 4;

    /**
     * @param array<string, int> $layers node => its layer (0: no dependencies)
     * @param array<string, array{0: float, 1: float}> $boxes node => its box's top-left corner
     * @param list<array{from: string, to: string, points: list<array{0: float, 1: float}>}> $edges
     *        each dependency (from the node depended on to the node that waits for it) as the
     *        points its line passes through: the right side of `from`, a point on each layer
     *        between, the left side of `to`
     */
    private function __construct(
        public readonly array $layers,
        public readonly array $boxes,
        public readonly array $edges,
        public readonly float $width,
        public readonly float $height,
    ) {
    }

    /**
     * The layout of these nodes, given in declaration order, each with the names it depends on
     * (a dependency not among the nodes is left out of the drawing).
     *
     * @param list<array{name: string, deps: list<string>}> $nodes
     */
    public static function of(array $nodes): self
    {
        $order = [];
        foreach ($nodes as $i => $node) {
            $order[(string) $node['name']] = $i;
        }
        $deps = [];
        $dependants = [];
        foreach ($nodes as $node) {
            $name = (string) $node['name'];
            $deps[$name] = array_values(array_unique(array_filter(
                array_map('strval', $node['deps']),
                fn (string $d) => isset($order[$d]) && $d !== $name,
            )));
            $dependants[$name] ??= [];
            foreach ($deps[$name] as $d) {
                $dependants[$d][] = $name;
            }
        }
        $layers = self::layers($order, $deps, $dependants);

        // Each layer's slots: the nodes, and a virtual point for each edge passing through.
        $slots = [];
        foreach ($order as $name => $_) {
            $slots[$layers[$name]][] = ['node', $name];
        }
        $paths = [];
        foreach ($order as $name => $_) {
            foreach ($deps[$name] as $d) {
                $via = [];
                for ($l = $layers[$d] + 1; $l < $layers[$name]; $l++) {
                    $key = "$d\0$name\0$l";
                    $slots[$l][] = ['via', $key];
                    $via[] = $key;
                }
                $paths[] = ['from' => $d, 'to' => $name, 'via' => $via];
            }
        }
        ksort($slots);
        $slots = self::ordered($slots, $paths);

        $tallest = 0;
        foreach ($slots as $column) {
            $tallest = max($tallest, count($column));
        }
        $height = self::PAD * 2 + $tallest * (self::BOX_HEIGHT + self::GAP_Y) - self::GAP_Y;
        $boxes = [];
        $points = [];
        foreach ($slots as $l => $column) {
            $x = self::PAD + $l * (self::BOX_WIDTH + self::GAP_X);
            // Each column centred on the tallest.
            $top = self::PAD + (($tallest - count($column)) * (self::BOX_HEIGHT + self::GAP_Y)) / 2;
            foreach ($column as $i => [$kind, $key]) {
                $y = $top + $i * (self::BOX_HEIGHT + self::GAP_Y);
                if ($kind === 'node') {
                    $boxes[$key] = [(float) $x, (float) $y];
                } else {
                    $points[$key] = [(float) $x, (float) $y + self::BOX_HEIGHT / 2];
                }
            }
        }
        $edges = [];
        foreach ($paths as $path) {
            [$fx, $fy] = $boxes[$path['from']];
            [$tx, $ty] = $boxes[$path['to']];
            $line = [[$fx + self::BOX_WIDTH, $fy + self::BOX_HEIGHT / 2]];
            foreach ($path['via'] as $key) {
                // Across the layer's column at the point's height.
                $line[] = $points[$key];
                $line[] = [$points[$key][0] + self::BOX_WIDTH, $points[$key][1]];
            }
            $line[] = [$tx, $ty + self::BOX_HEIGHT / 2];
            $edges[] = ['from' => $path['from'], 'to' => $path['to'], 'points' => $line];
        }
        $width = self::PAD * 2 + max(1, count($slots)) * (self::BOX_WIDTH + self::GAP_X) - self::GAP_X;
        return new self($layers, $boxes, $edges, (float) $width, (float) max($height, self::PAD * 2 + self::BOX_HEIGHT));
    }

    /**
     * Each node's layer: the longest path to it from a node without dependencies (Kahn's order).
     * A node on a cycle (refused at dispatch, so never expected) goes after all the others.
     *
     * @param array<string, int> $order
     * @param array<string, list<string>> $deps
     * @param array<string, list<string>> $dependants
     * @return array<string, int>
     */
    private static function layers(array $order, array $deps, array $dependants): array
    {
        $waiting = array_map('count', $deps);
        $ready = array_keys(array_filter($waiting, fn (int $n) => $n === 0));
        $layers = array_fill_keys($ready, 0);
        for ($i = 0; $i < count($ready); $i++) {
            $name = $ready[$i];
            foreach ($dependants[$name] as $next) {
                $layers[$next] = max($layers[$next] ?? 0, $layers[$name] + 1);
                if (--$waiting[$next] === 0) {
                    $ready[] = $next;
                }
            }
        }
        $placed = array_intersect_key($layers, array_flip($ready));
        $last = $placed === [] ? -1 : max($placed);
        // In declaration order.
        $ordered = [];
        foreach ($order as $name => $_) {
            $ordered[$name] = $placed[$name] ?? $last + 1;
        }
        return $ordered;
    }

    /**
     * The slots of each layer in an order that crosses few edges: sweeps down (each slot at the
     * mean position of what it comes from) and up (of what it goes to), a slot without neighbours
     * keeping its place, ties in the order before.
     *
     * @param array<int, list<array{0: string, 1: string}>> $slots
     * @param list<array{from: string, to: string, via: list<string>}> $paths
     * @return array<int, list<array{0: string, 1: string}>>
     */
    private static function ordered(array $slots, array $paths): array
    {
        // Each path as its chain of slot keys: a neighbour is the next or previous key.
        $up = [];
        $down = [];
        foreach ($paths as $path) {
            $chain = array_merge([$path['from']], $path['via'], [$path['to']]);
            for ($i = 1; $i < count($chain); $i++) {
                $up[$chain[$i]][] = $chain[$i - 1];
                $down[$chain[$i - 1]][] = $chain[$i];
            }
        }
        $last = array_key_last($slots) ?? 0;
        for ($sweep = 0; $sweep < self::SWEEPS; $sweep++) {
            for ($l = 1; $l <= $last; $l++) {
                $slots[$l] = self::byBarycenter($slots[$l] ?? [], $slots[$l - 1] ?? [], $up);
            }
            for ($l = $last - 1; $l >= 0; $l--) {
                $slots[$l] = self::byBarycenter($slots[$l] ?? [], $slots[$l + 1] ?? [], $down);
            }
        }
        return $slots;
    }

    /**
     * @param list<array{0: string, 1: string}> $column
     * @param list<array{0: string, 1: string}> $beside
     * @param array<string, list<string>> $neighbours
     * @return list<array{0: string, 1: string}>
     */
    private static function byBarycenter(array $column, array $beside, array $neighbours): array
    {
        $at = [];
        foreach ($beside as $i => [, $key]) {
            $at[$key] = $i;
        }
        $rank = [];
        foreach ($column as $i => [, $key]) {
            $positions = array_values(array_filter(array_map(fn ($n) => $at[$n] ?? null, $neighbours[$key] ?? []), fn ($p) => $p !== null));
            // Scaled to the column's own length so a slot without neighbours keeps its place.
            $rank[$i] = $positions === []
                ? $i * max(1, count($beside)) / max(1, count($column))
                : array_sum($positions) / count($positions);
        }
        $indexes = array_keys($column);
        usort($indexes, fn (int $a, int $b) => [$rank[$a], $a] <=> [$rank[$b], $b]);
        return array_map(fn (int $i) => $column[$i], $indexes);
    }
}
