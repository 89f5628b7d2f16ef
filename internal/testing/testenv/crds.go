package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
)

// installCRDs creates every CustomResourceDefinition found in dir (other
// kinds, such as the Gateway API's ValidatingAdmissionPolicy for safe
// upgrades, are skipped) and waits until each is established and its
// resources are listed by discovery.
func installCRDs(ctx context.Context, ext apiextensionsclient.Interface, kube kubernetes.Interface, dir string) error {
	crds, err := readCRDs(dir)
	if err != nil {
		return err
	}
	if len(crds) == 0 {
		return fmt.Errorf("install CRDs: no CustomResourceDefinition in %s", dir)
	}
	for i := range crds {
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crds[i], metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("install CRD %s: %w", crds[i].Name, err)
		}
	}
	for _, crd := range crds {
		if err := waitServed(ctx, ext, kube, crd); err != nil {
			return err
		}
	}
	return nil
}

func readCRDs(dir string) ([]apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list CRDs in %s: %w", dir, err)
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read CRD file: %w", err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := dec.Decode(&crd); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("decode %s: %w", file, err)
			}
			if crd.Kind == "CustomResourceDefinition" {
				crds = append(crds, crd)
			}
		}
	}
	return crds, nil
}

func waitServed(ctx context.Context, ext apiextensionsclient.Interface, kube kubernetes.Interface, crd apiextensionsv1.CustomResourceDefinition) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		established := slices.ContainsFunc(got.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
		})
		if !established {
			last = "not established"
			return false, nil
		}
		for _, v := range got.Spec.Versions {
			if !v.Served {
				continue
			}
			list, err := kube.Discovery().ServerResourcesForGroupVersion(got.Spec.Group + "/" + v.Name)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == got.Spec.Names.Plural }) {
				last = got.Spec.Names.Plural + " not in discovery for " + v.Name
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for CRD %s to be served: %w (last: %s)", crd.Name, err, last)
	}
	return nil
}
