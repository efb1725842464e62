package checkpoint

// UnderWine reports, to the package's external tests, whether the test
// binary runs under Wine (see underWine).
var UnderWine = underWine

// RewriteInPlace writes a file over in place, to the package's external
// tests, so that its Version changes (see rewriteInPlace).
var RewriteInPlace = rewriteInPlace
