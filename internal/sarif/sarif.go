// Package sarif writes and checks SARIF 2.1.0 logs (the OASIS Static
// Analysis Results Interchange Format), the subset statevet emits.
package sarif

// Version and Schema identify SARIF 2.1.0.
const (
	Version = "2.1.0"
	Schema  = "https://json.schemastore.org/sarif-2.1.0.json"
)

// Log is a sarifLog.
type Log struct {
	Schema  string `json:"$schema"`
	Version string `json:"version"`
	Runs    []Run  `json:"runs"`
}

// Run is one run of a tool.
type Run struct {
	Tool               Tool                        `json:"tool"`
	OriginalURIBaseIDs map[string]ArtifactLocation `json:"originalUriBaseIds,omitempty"`
	ColumnKind         string                      `json:"columnKind,omitempty"`
	Results            []Result                    `json:"results"`
}

// Tool describes the analysis tool.
type Tool struct {
	Driver Driver `json:"driver"`
}

// Driver is the tool's toolComponent.
type Driver struct {
	Name           string `json:"name"`
	Version        string `json:"version,omitempty"`
	InformationURI string `json:"informationUri,omitempty"`
	Rules          []Rule `json:"rules"`
}

// Rule is a reportingDescriptor: one analyzer.
type Rule struct {
	ID                   string         `json:"id"`
	Name                 string         `json:"name,omitempty"`
	ShortDescription     *Message       `json:"shortDescription,omitempty"`
	FullDescription      *Message       `json:"fullDescription,omitempty"`
	HelpURI              string         `json:"helpUri,omitempty"`
	Help                 *Message       `json:"help,omitempty"`
	DefaultConfiguration *Configuration `json:"defaultConfiguration,omitempty"`
}

// Configuration is a reportingConfiguration.
type Configuration struct {
	Level string `json:"level"`
}

// Message is a message with plain text.
type Message struct {
	Text string `json:"text"`
}

// Result is one finding.
type Result struct {
	RuleID           string     `json:"ruleId"`
	RuleIndex        int        `json:"ruleIndex"`
	Level            string     `json:"level"`
	Message          Message    `json:"message"`
	Locations        []Location `json:"locations"`
	RelatedLocations []Location `json:"relatedLocations,omitempty"`
	Fixes            []Fix      `json:"fixes,omitempty"`
}

// Location is a location, with an id and message when it is related.
type Location struct {
	ID               *int             `json:"id,omitempty"`
	PhysicalLocation PhysicalLocation `json:"physicalLocation"`
	Message          *Message         `json:"message,omitempty"`
}

// PhysicalLocation is a region of a file.
type PhysicalLocation struct {
	ArtifactLocation ArtifactLocation `json:"artifactLocation"`
	Region           *Region          `json:"region,omitempty"`
}

// ArtifactLocation is a file, relative to a base URI when URIBaseID is set.
type ArtifactLocation struct {
	URI       string `json:"uri"`
	URIBaseID string `json:"uriBaseId,omitempty"`
}

// Region is a range of lines and columns (1-based; columns in the run's
// columnKind), or of bytes.
type Region struct {
	StartLine   int  `json:"startLine,omitempty"`
	StartColumn int  `json:"startColumn,omitempty"`
	EndLine     int  `json:"endLine,omitempty"`
	EndColumn   int  `json:"endColumn,omitempty"`
	ByteOffset  *int `json:"byteOffset,omitempty"`
	ByteLength  *int `json:"byteLength,omitempty"`
}

// Fix is a suggested fix.
type Fix struct {
	Description     Message          `json:"description"`
	ArtifactChanges []ArtifactChange `json:"artifactChanges"`
}

// ArtifactChange is the edits of one file.
type ArtifactChange struct {
	ArtifactLocation ArtifactLocation `json:"artifactLocation"`
	Replacements     []Replacement    `json:"replacements"`
}

// Replacement replaces a region of bytes.
type Replacement struct {
	DeletedRegion   Region   `json:"deletedRegion"`
	InsertedContent *Content `json:"insertedContent,omitempty"`
}

// Content is an artifactContent with text.
type Content struct {
	Text string `json:"text"`
}
