package checkpoint

// UnderWine reports, to the package's external tests, whether the test
// binary runs under Wine (see underWine).
var UnderWine = underWine
