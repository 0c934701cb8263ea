<?php

namespace Drover\Dashboard\Repositories;

/** A state that cannot be searched where the application keeps it, with why. */
final class SearchUnavailable extends \RuntimeException
{
}
