<?php

namespace Drover;

/**
 * The drover binary this application uses: drover.binary (DROVER_BINARY), else `drover` on PATH;
 * and what it says of itself (`drover version --json`), for `php artisan drover:install`.
 */
final class Binary
{
    /** The executable's path, or null when there is none. */
    public static function find(?string $configured): ?string
    {
        foreach ([$configured, getenv('DROVER_BINARY') ?: null] as $candidate) {
            if ($candidate !== null && $candidate !== '') {
                return is_executable($candidate) ? $candidate : null;
            }
        }
        foreach (explode(PATH_SEPARATOR, (string) getenv('PATH')) as $dir) {
            if ($dir !== '' && is_executable("$dir/drover")) {
                return "$dir/drover";
            }
        }
        return null;
    }

    /**
     * `drover version --json`: the binary's version, the configuration contract it reads and the
     * schema version it needs.
     *
     * @return array{version: string, contract: int, schema: int}
     * @throws \RuntimeException naming the binary when it does not answer as a drover does
     */
    public static function describe(string $binary): array
    {
        $output = [];
        exec(escapeshellarg($binary) . ' version --json 2>&1', $output, $code);
        $answer = json_decode(implode("\n", $output), true);
        if ($code !== 0 || !is_array($answer) || !isset($answer['version'], $answer['contract'], $answer['schema'])) {
            throw new \RuntimeException("$binary version --json did not answer as drover does (exit $code): " . trim(implode("\n", $output)) . ' — is it an older drover, or another program?');
        }
        return ['version' => (string) $answer['version'], 'contract' => (int) $answer['contract'], 'schema' => (int) $answer['schema']];
    }
}
