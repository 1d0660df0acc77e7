package jobs

// SetBulkPage makes bulk actions list n jobs at a time until the returned
// function restores the page size.
func SetBulkPage(n int) (restore func()) {
	old := bulkPage
	bulkPage = n
	return func() { bulkPage = old }
}
