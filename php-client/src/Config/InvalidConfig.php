<?php

namespace Drover\Config;

/** config/drover.php has problems; the message lists all of them. */
final class InvalidConfig extends \InvalidArgumentException
{
    /** @param list<string> $problems */
    public function __construct(public readonly array $problems)
    {
        parent::__construct("invalid config/drover.php:\n  - " . implode("\n  - ", $problems));
    }
}
