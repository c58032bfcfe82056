package testenv

import (
	"context"
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scraped is one scrape of an exporter, by metric family name.
type Scraped map[string]*dto.MetricFamily

// Scrape fetches url (an exporter's /metrics, in the Prometheus text
// format) and parses it. Tests and demos use it to read what Prometheus
// would.
func Scrape(ctx context.Context, url string) (Scraped, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing the scrape of %s: %w", url, err)
	}
	return Scraped(fams), nil
}

// Has reports whether the scrape has the family name.
func (s Scraped) Has(name string) bool { _, ok := s[name]; return ok }

// Sum adds the values of name's samples whose labels include every
// name=value pair in match (given as name, value, name, value...): counter
// and gauge values, and the sample counts of histograms.
func (s Scraped) Sum(name string, match ...string) float64 {
	f, ok := s[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, m := range f.Metric {
		if !labelsMatch(m, match) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}

// Series returns how many samples of name match.
func (s Scraped) Series(name string, match ...string) int {
	f, ok := s[name]
	if !ok {
		return 0
	}
	n := 0
	for _, m := range f.Metric {
		if labelsMatch(m, match) {
			n++
		}
	}
	return n
}

func labelsMatch(m *dto.Metric, match []string) bool {
	for i := 0; i+1 < len(match); i += 2 {
		found := false
		for _, l := range m.Label {
			if l.GetName() == match[i] && l.GetValue() == match[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
