<?php

namespace Drover\Dashboard;

/**
 * A small line chart as inline SVG, drawn on the server: no script, no CDN, readable without
 * JavaScript and in a screenshot. Each series is a list of [x, y] (x: Unix time in seconds).
 */
final class Chart
{
    private const WIDTH = 560;
    private const HEIGHT = 160;
    private const PAD_LEFT = 52;
    private const PAD_BOTTOM = 22;
    private const COLOURS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea'];

    /**
     * @param array<string, list<array{0: int|float, 1: int|float|null}>> $series name => points
     * @param array{0: int, 1: int}|null $window the time the x axis spans (Unix seconds; null:
     *        the points' own span), so a day with one busy minute still reads as a day
     */
    public static function svg(string $title, string $unit, array $series, ?array $window = null): string
    {
        $points = [];
        foreach ($series as $values) {
            foreach ($values as [$x, $y]) {
                if ($y !== null) {
                    $points[] = [(float) $x, (float) $y];
                }
            }
        }
        $esc = fn (string $s) => htmlspecialchars($s, ENT_QUOTES);
        $w = self::WIDTH;
        $h = self::HEIGHT;
        $svg = "<svg class=\"chart\" role=\"img\" aria-label=\"{$esc($title)}\" viewBox=\"0 0 $w $h\" width=\"$w\" height=\"$h\" xmlns=\"http://www.w3.org/2000/svg\">";
        $svg .= "<text x=\"" . self::PAD_LEFT . "\" y=\"12\" class=\"chart-title\">{$esc($title)} ({$esc($unit)})</text>";
        if ($points === []) {
            return $svg . '<text x="' . ($w / 2) . '" y="' . ($h / 2) . '" text-anchor="middle" class="chart-empty">no data in this window</text></svg>';
        }
        $xs = array_column($points, 0);
        $ys = array_column($points, 1);
        [$x0, $x1] = $window === null ? [min($xs), max($xs)] : [(float) $window[0], (float) $window[1]];
        $y1 = max($ys) > 0 ? max($ys) * 1.1 : 1.0;
        $x1 = $x1 > $x0 ? $x1 : $x0 + 60;
        $plotW = $w - self::PAD_LEFT - 8;
        $plotH = $h - self::PAD_BOTTOM - 20;
        $px = fn (float $x) => self::PAD_LEFT + ($x - $x0) / ($x1 - $x0) * $plotW;
        $py = fn (float $y) => 20 + $plotH - $y / $y1 * $plotH;
        // Axes and labels: the top value, zero, and the window's start and end times.
        $svg .= sprintf('<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>', self::PAD_LEFT, 20 + $plotH, $w - 8, 20 + $plotH);
        $svg .= sprintf('<text x="%d" y="%d" text-anchor="end" class="tick">%s</text>', self::PAD_LEFT - 4, 24, $esc(self::number($y1)));
        $svg .= sprintf('<text x="%d" y="%d" text-anchor="end" class="tick">0</text>', self::PAD_LEFT - 4, 20 + $plotH);
        $format = $x1 - $x0 > 86400 ? 'D H:i' : 'H:i';
        $svg .= sprintf('<text x="%d" y="%d" class="tick">%s</text>', self::PAD_LEFT, $h - 6, gmdate($format, (int) $x0));
        $svg .= sprintf('<text x="%d" y="%d" text-anchor="end" class="tick">%s UTC</text>', $w - 8, $h - 6, gmdate($format, (int) $x1));
        $i = 0;
        foreach ($series as $name => $values) {
            $colour = self::COLOURS[$i % count(self::COLOURS)];
            $coords = [];
            foreach ($values as [$x, $y]) {
                if ($y !== null) {
                    $coords[] = sprintf('%.1f,%.1f', $px((float) $x), $py((float) $y));
                }
            }
            if (count($coords) === 1) {
                [$cx, $cy] = explode(',', $coords[0]);
                $svg .= "<circle cx=\"$cx\" cy=\"$cy\" r=\"3\" fill=\"$colour\"/>";
            } elseif ($coords !== []) {
                $svg .= '<polyline fill="none" stroke="' . $colour . '" stroke-width="2" points="' . implode(' ', $coords) . '"/>';
            }
            $svg .= sprintf('<text x="%d" y="12" text-anchor="end" fill="%s" class="legend">%s</text>', $w - 8 - 90 * (count($series) - 1 - $i), $colour, $esc((string) $name));
            $i++;
        }
        return $svg . '</svg>';
    }

    public static function number(float $v): string
    {
        return match (true) {
            $v >= 100 => number_format($v, 0),
            $v >= 10 => number_format($v, 1),
            default => number_format($v, 2),
        };
    }
}
